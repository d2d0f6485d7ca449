"""`python -m societas.cli`: the `societas` command."""

from societas.cli.app import main

if __name__ == "__main__":
    main()
