from bnstudy.cli import main

raise SystemExit(main())
