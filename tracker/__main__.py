import sys

from tracker.cli.main import main

if __name__ == "__main__":  # not when a load-worker process imports the main module
    sys.exit(main())
