"""`python -m podsim` is the same as the `podsim` console script."""

from podsim.cli import main

if __name__ == "__main__":
    main()
