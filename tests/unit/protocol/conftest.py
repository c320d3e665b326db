"""Lets the protocol tests import their helper module (``protocol_samples``) under any import mode."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
