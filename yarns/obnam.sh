# Shell library for obnam's yarn scenarios (yarns/tools/yarn-runner -s
# yarns/obnam.sh).
#
# Steps run under `sh -xeu` with a clean environment: DATADIR is fresh
# for each scenario, SRCDIR is the checkout, HOME is $DATADIR/HOME.
# Each user (client) of a scenario has $DATADIR/USER.conf (settings) and
# may have $DATADIR/USER.env (environment, e.g. GNUPGHOME).
# OBNAM is the program under test: the checkout's bin/obnam unless the
# runner is given another (./check's venv runs the obnam pip installed).

OBNAM="${OBNAM:-$SRCDIR/bin/obnam}"
TOOLS="$SRCDIR/yarns/tools"
REFERENCE_DIR="${REFERENCE_DIR:-$SRCDIR/../shared/reference/obnam-1.x}"

# Append `KEY = VALUE` to USER's configuration, creating it if needed.
# Like Obnam 1.x's harness, the fixed keys are repeated on every call,
# so the file also checks that repeated keys are accepted (last wins).
add_to_config()
{
    local conf="$DATADIR/$1.conf"
    if [ ! -e "$conf" ]
    then
        printf '[config]\nclient-name = %s\n' "$1" > "$conf"
    fi
    {
        echo "weak-random = yes"
        echo "lock-timeout = 0"
        if [ -n "${REPOSITORY_FORMAT:-}" ]
        then
            echo "repository-format = $REPOSITORY_FORMAT"
        fi
        echo "$2 = $3"
    } >> "$conf"
}

# Add `export NAME=VALUE` to USER's environment file.
add_to_env()
{
    echo "export $2=\"$3\"" >> "$DATADIR/$1.env"
}

# run_obnam USER ARG...: obnam as USER, with USER's config and env only.
run_obnam()
{
    local user="$1"
    shift
    add_to_config "$user" client-name "$user"
    (
        if [ -e "$DATADIR/$user.env" ]
        then
            . "$DATADIR/$user.env"
        fi
        "$OBNAM" --no-default-config --config "$DATADIR/$user.conf" \
            --quiet --log-level debug --log "$DATADIR/obnam.log" "$@"
    )
}

# attempt CMD...: run CMD, keep its stdout, stderr and exit code for
# the THEN steps; never fail the step itself.
# The command runs with shell tracing off (steps run under `sh -x`, whose
# trace would otherwise end up in the captured stderr).
attempt()
{
    if ( { set +x; } 2> /dev/null; "$@" ) \
            > "$DATADIR/attempt.stdout" 2> "$DATADIR/attempt.stderr"
    then
        echo 0 > "$DATADIR/attempt.exit"
    else
        echo "$?" > "$DATADIR/attempt.exit"
    fi
}

attempt_exit_is()
{
    if ! grep -Fx -- "$1" "$DATADIR/attempt.exit"
    then
        echo "expected exit code $1, got $(cat "$DATADIR/attempt.exit")" 1>&2
        echo "stderr was:" 1>&2
        cat "$DATADIR/attempt.stderr" 1>&2
        return 1
    fi
}

# manifest DIR: a summain-style manifest of DIR (see yarns/tools/manifest),
# with the link counts of directories left out (they change when a
# restore adds directories differently).
manifest()
{
    "$TOOLS/manifest" --no-dir-nlink "$1"
}

# restored_path TARGET DIR: where DIR ends up when restored into TARGET
# (obnam restores full absolute paths below --to).
restored_path()
{
    echo "$DATADIR/$1$DATADIR/$2"
}

# Compare two manifests; show the difference when they differ.
same_manifests()
{
    diff -u "$1" "$2"
}

# Compare a file of expected bytes with what a command wrote; on a
# difference, show both (od -c makes invisible characters visible).
same_file_contents()
{
    if ! cmp "$1" "$2"
    then
        echo "expected:" 1>&2
        od -c "$1" 1>&2
        echo "got:" 1>&2
        od -c "$2" 1>&2
        return 1
    fi
}

# nth_genid USER REPO N: the Nth generation id (1 = oldest) of USER.
nth_genid()
{
    run_obnam "$1" genids -r "$DATADIR/$2" | awk -v n="$3" 'NR == n' | grep .
}

# latest_genid USER REPO
latest_genid()
{
    run_obnam "$1" genids -r "$DATADIR/$2" | tail -n1 | grep .
}

# A GnuPG home under a short path (gpg-agent's socket path is limited);
# its name is kept in $DATADIR/gnupghome-USER so FINALLY can clean up.
make_gnupghome()
{
    local home
    home="$(mktemp -d /tmp/obnam-gpg.XXXXXX)"
    chmod 700 "$home"
    echo "$home" > "$DATADIR/gnupghome-$1"
    echo "$home"
}

stop_gnupghomes()
{
    local f
    for f in "$DATADIR"/gnupghome-*
    do
        if [ -e "$f" ]
        then
            gpgconf --homedir "$(cat "$f")" --kill gpg-agent || true
            rm -rf "$(cat "$f")"
            rm -f "$f"
        fi
    done
}
