from rlvr.cli import main

if __name__ == "__main__":  # not when a spawned worker imports this module
    raise SystemExit(main())
