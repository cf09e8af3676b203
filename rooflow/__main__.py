from rooflow.cli import main

raise SystemExit(main())
