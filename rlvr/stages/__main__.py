from rlvr.stages import main

raise SystemExit(main())
