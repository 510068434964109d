from rlvr.cli import main

raise SystemExit(main())
