"""`python -m sim.cli`: the `societas` command."""

from sim.cli.app import main

if __name__ == "__main__":
    main()
