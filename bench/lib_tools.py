"""How each backup tool is driven in each mode: the command lines only.

One object per (tool, mode).  Modes:

  plain      repository on the local disk; obnam unencrypted, borg
             --encryption=none, restic (always encrypted)
  encrypted  repository on the local disk; obnam --encrypt-with a
             throwaway gpg key, borg --encryption=repokey, restic as in plain
  sftp       repository behind the local sshd: obnam to sftp://, borg to
             ssh:// (borg serve on the same machine), restic's sftp backend;
             unencrypted as in plain
  gluster    repository on a GlusterFS volume on 127.0.0.1 (replica 3,
             mounted through FUSE); unencrypted as in plain

Each tool keeps its home, caches and security data in the work directory,
so every run starts cold for all of them.
"""

import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
OBNAM = os.path.join(os.path.dirname(HERE), 'bin', 'obnam')
OBNAM_PACKAGES = [os.path.join(os.path.dirname(HERE), 'obnamlib')]

MODES = ('plain', 'encrypted', 'sftp', 'gluster')
# What --mode all means: the modes that need nothing but the tools.  gluster
# needs root and GlusterFS, and takes long at large scales: it runs only
# when named.
ALL_MODES = ('plain', 'encrypted', 'sftp')
PASSWORD = 'bench-password'


def compile_obnam():
    """Byte-compile the checkout's modules, as an installed package has
    them: with PYTHONDONTWRITEBYTECODE set (or a module changed since the
    last compile) each obnam command would compile what it imports, more
    of it for an encrypted run.  False if that failed."""
    env = dict(os.environ)
    env.pop('PYTHONDONTWRITEBYTECODE', None)
    done = subprocess.run([_interpreter(OBNAM), '-m', 'compileall', '-q']
                          + OBNAM_PACKAGES, env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return done.returncode == 0


def _interpreter(script):
    """The interpreter a script's #! line names."""
    with open(script, 'rb') as f:
        line = f.readline().decode('utf-8', 'replace')
    return line[2:].split()[0] if line.startswith('#!') else 'python3'


class Tool:
    """Command lines for one tool in one mode; no running, no timing."""

    name = None
    program = None

    def __init__(self, workdir, mode, gpg=None, sshd=None, gluster=None):
        self.mode = mode
        self.gpg = gpg
        self.sshd = sshd
        self.gluster = gluster
        base = os.path.join(workdir, mode)
        repo_dir = gluster.mountpoint if gluster else base
        self.repo_path = os.path.join(repo_dir, self.name + '-repo')
        self.home = os.path.join(base, self.name + '-home')
        os.makedirs(self.home)
        self.env = dict(os.environ, HOME=self.home, LC_ALL='C.UTF-8')
        self.env.pop('SSH_AUTH_SOCK', None)     # only the bench's own key
        self.generation = 0

    @property
    def server(self):
        """What serves the repository, if it spends CPU time no wait4 of
        ours counts (sshd's sessions; gluster's daemons), else None."""
        return self.sshd or self.gluster

    def init_command(self):
        """The command that creates the repository, or None."""
        return None

    def backup_command(self, corpus):
        raise NotImplementedError

    def restore_command(self, target):
        """(argv, cwd) restoring the newest backup into target."""
        raise NotImplementedError

    def check_command(self):
        raise NotImplementedError

    def verify_command(self):
        """A check that also verifies every chunk's content, or None when
        check_command already does."""
        return None


class Obnam(Tool):
    name = 'obnam'
    program = OBNAM
    extra_options = []

    def describe(self):
        return {'plain': 'obnam: local disk, unencrypted',
                'encrypted': 'obnam: local disk, --encrypt-with (gpg key)',
                'sftp': 'obnam: sftp:// to the local sshd, unencrypted',
                'gluster': 'obnam: GlusterFS volume (FUSE), unencrypted',
                }[self.mode]

    def base(self):
        argv = [OBNAM, '--no-default-configs', '--quiet', '--log=none',
                '--client-name=bench', '--repository', self.repository()]
        if self.mode == 'encrypted':
            argv += ['--encrypt-with=%s' % self.gpg.fingerprint,
                     '--gnupghome=%s' % self.gpg.path]
        if self.mode == 'sftp':
            argv += ['--ssh-key=%s' % self.sshd.client_key,
                     '--ssh-known-hosts=%s' % self.sshd.known_hosts]
        return argv + self.extra_options

    def repository(self):
        if self.mode == 'sftp':
            return self.sshd.url(self.repo_path)
        return self.repo_path

    def backup_command(self, corpus):
        self.generation += 1
        return self.base() + ['backup', corpus]

    def restore_command(self, target):
        return self.base() + ['restore', '--to', target], None

    def check_command(self):
        return self.base() + ['fsck']


class Borg(Tool):
    name = 'borg'
    program = 'borg'

    def __init__(self, workdir, mode, gpg=None, sshd=None, gluster=None):
        super().__init__(workdir, mode, gpg, sshd, gluster)
        self.env.update(BORG_BASE_DIR=self.home,
                        BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK='yes',
                        BORG_RELOCATED_REPO_ACCESS_IS_OK='yes',
                        BORG_PASSPHRASE=PASSWORD)
        if mode == 'sftp':
            self.env['BORG_RSH'] = sshd.ssh_command()
            # borg serve's own state stays in the work directory too.
            self.env['BORG_REMOTE_PATH'] = 'env BORG_BASE_DIR=%s borg' % (
                os.path.join(self.home, 'server'))

    def describe(self):
        return {'plain': 'borg: local disk, --encryption=none',
                'encrypted': 'borg: local disk, --encryption=repokey',
                'sftp': 'borg: ssh:// to borg serve via the local sshd, '
                        '--encryption=none',
                'gluster': 'borg: GlusterFS volume (FUSE), '
                           '--encryption=none',
                }[self.mode]

    def repository(self):
        if self.mode == 'sftp':
            return 'ssh://%s@%s:%d%s' % (self.sshd.user, self.sshd.host,
                                         self.sshd.port, self.repo_path)
        return self.repo_path

    def init_command(self):
        encryption = 'repokey' if self.mode == 'encrypted' else 'none'
        return ['borg', 'init', '--encryption=%s' % encryption,
                self.repository()]

    def backup_command(self, corpus):
        self.generation += 1
        return ['borg', 'create', self.archive(), corpus]

    def archive(self):
        return '%s::gen%d' % (self.repository(), self.generation)

    def restore_command(self, target):
        return ['borg', 'extract', self.archive()], target

    def check_command(self):
        return ['borg', 'check', self.repository()]

    def verify_command(self):
        return ['borg', 'check', '--verify-data', self.repository()]


class Restic(Tool):
    name = 'restic'
    program = 'restic'

    def __init__(self, workdir, mode, gpg=None, sshd=None, gluster=None):
        super().__init__(workdir, mode, gpg, sshd, gluster)
        self.env.update(RESTIC_PASSWORD=PASSWORD,
                        RESTIC_CACHE_DIR=os.path.join(self.home, 'cache'))

    def describe(self):
        return {'plain': 'restic: local disk (always encrypted)',
                'encrypted': 'restic: local disk (always encrypted; same '
                             'commands as plain)',
                'sftp': 'restic: sftp backend via the local sshd',
                'gluster': 'restic: GlusterFS volume (FUSE; always '
                           'encrypted)',
                }[self.mode]

    def base(self):
        if self.mode != 'sftp':
            return ['restic', '--repo', self.repo_path]
        sftp = '%s %s@%s -s sftp' % (self.sshd.ssh_command(), self.sshd.user,
                                     self.sshd.host)
        return ['restic', '-o', 'sftp.command=%s' % sftp, '--repo',
                'sftp:%s@%s:%s' % (self.sshd.user, self.sshd.host,
                                   self.repo_path)]

    def init_command(self):
        return self.base() + ['init']

    def backup_command(self, corpus):
        self.generation += 1
        return self.base() + ['backup', '--quiet', corpus]

    def restore_command(self, target):
        return self.base() + ['restore', 'latest', '--target', target], None

    def check_command(self):
        return self.base() + ['check', '--read-data']


TOOLS = {tool.name: tool for tool in (Obnam, Borg, Restic)}
