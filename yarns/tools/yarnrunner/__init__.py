"""A runner for yarn scenario files, compatible with cmdtest's yarn.

cmdtest (which provides `yarn`) is not in Debian 13, so obnam carries
its own runner for the subset of the yarn format its scenarios use.
"""
