"""How Obnam 1.x derived its error identifiers, for tests that check a new
code was made the same way (and so cannot collide by accident with one a
user of Obnam 1.x has seen).  obnamlib itself writes every code as a
literal, so that the code a user sees can be found with grep."""

import hashlib


def legacy_code(class_name, module_name):
    """Obnam 1.x's identifier: R + five hex digits of MD5(class + module) + X."""
    digest = hashlib.md5((class_name + module_name).encode()).hexdigest()
    return 'R%sX' % digest[:5].upper()
