"""Make yarns/tools/yarnrunner importable for the runner's tests."""

import os
import sys

TOOLS = os.path.join(os.path.dirname(__file__), '..', '..', 'yarns', 'tools')
sys.path.insert(0, os.path.abspath(TOOLS))
