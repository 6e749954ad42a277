#!/usr/bin/python3
"""Install obnam: the obnamlib package (with larch inside it) and the obnam program."""

import os

from setuptools import find_packages, setup


def version():
    namespace = {}
    with open(os.path.join('obnamlib', 'version.py')) as f:
        exec(f.read(), namespace)
    return namespace['__version__']


setup(
    name='obnam',
    version=version(),
    description='backup program compatible with Obnam 1.x repositories',
    long_description=open('README').read(),
    license='GPL-3+',
    packages=find_packages(include=['obnamlib',
                                    'obnamlib.*']),
    scripts=['bin/obnam'],
    python_requires='>=3.9',
)
