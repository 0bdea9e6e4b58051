"""`python -m foxc.evaluate CKPT (--data PATH | --synthetic MARKET)`: see foxc.evaluate.command."""
import sys

from .command import main

if __name__ == "__main__":
    sys.exit(main())
