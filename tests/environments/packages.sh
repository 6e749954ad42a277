# The Debian packages each place of ./check needs, by Debian release.
# Sourced by check and by tests/environments/*.

# What obnam needs to run (debian/control's Depends and Recommends).
RUNTIME_PACKAGES="python3-yaml python3-paramiko python3-cryptography \
gnupg openssh-client python3-ttystatus python3-pyfuse3 fuse3"

# What its tests need.
TEST_PACKAGES="python3-pytest python3-pytest-timeout python3-hypothesis \
attr acl openssh-server xz-utils man-db"

# What building the Debian package needs (debian/control's
# Build-Depends); ./check builds and installs it in its Debian root.
PACKAGING_PACKAGES="build-essential debhelper dh-python"

# What this machine needs to make the other places: a Debian root
# (debootstrap) and a venv with pyfuse3 built from PyPI's source (from
# pyenv's Python 3.13, or the system's where it is 3.13: python3-venv).
BUILDER_PACKAGES="debootstrap libfuse3-dev pkg-config gcc python3-venv python3-dev"

# debian_release: 12 or 13 (the major version of /etc/debian_version;
# a testing or unstable system counts as 13).
debian_release()
{
    local version
    version="$(cat /etc/debian_version 2>/dev/null || echo unknown)"
    case "$version" in
        12*|bookworm*) echo 12 ;;
        *) echo 13 ;;
    esac
}

# release_codename RELEASE
release_codename()
{
    case "$1" in
        12) echo bookworm ;;
        13) echo trixie ;;
        *) echo "unknown Debian release $1" 1>&2; return 1 ;;
    esac
}

# other_release RELEASE: the supported release that RELEASE is not.
other_release()
{
    case "$1" in
        12) echo 13 ;;
        *) echo 12 ;;
    esac
}

# packages_for RELEASE: runtime and test packages there.  On Debian 12,
# python3-cliapp and cmdtest too: the references that the parity tests
# compare obnam's command line and scenario runner with (Debian 13 has
# neither).
packages_for()
{
    echo $RUNTIME_PACKAGES $TEST_PACKAGES
    if [ "$1" = 12 ]
    then
        echo python3-cliapp cmdtest
    fi
}

# root_packages_for RELEASE: what ./check's Debian root of RELEASE holds.
root_packages_for()
{
    packages_for "$1"
    echo $PACKAGING_PACKAGES
}

# missing_packages RELEASE: those of packages_for RELEASE and of
# BUILDER_PACKAGES that are not installed here, one a line.
missing_packages()
{
    local p
    for p in $(packages_for "$1") $BUILDER_PACKAGES
    do
        if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null |
                grep -q '^install ok installed$'
        then
            echo "$p"
        fi
    done
}
