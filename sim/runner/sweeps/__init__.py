"""Sweeps: a grid of config overrides x seeds from a YAML file (`spec`), what is left of it in a store
(`backlog`), one run in any worker (`worker`), and the executors (`local`, `ray_tasks`, chosen by `executor`)."""
