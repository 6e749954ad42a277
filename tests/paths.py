"""Where things are in the checkout, for tests at any depth of tests/."""

import os

CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OBNAM = os.path.join(CHECKOUT, 'bin', 'obnam')
DATA = os.path.join(CHECKOUT, 'tests', 'data')
