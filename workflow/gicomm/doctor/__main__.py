import sys

from gicomm.doctor.cli import main

sys.exit(main())
