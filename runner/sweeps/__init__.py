"""Sweeps: a grid of config overrides x seeds from a YAML file (`spec`), what is left of it in a store
(`backlog`), how far it has got (`status`), one run in any worker (`worker`), and the executors (`local`, `ray_tasks`,
chosen by `executor`); the bounds the CLI states are in `runner.limits`."""
