"""Set before Haystack is first imported (its telemetry decides then): no usage pings leave a script that uses the
library directly either, as none leave the command line and the bots."""

import os

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
