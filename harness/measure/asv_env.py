"""An asv environment that benchmarks commits with the interpreter already installed.

asv 0.6.6's ``existing`` environment cannot run commit ranges, ``continuous``
or ``find``; its ``virtualenv`` builds an environment per commit (minutes, and a
CUDA torch download on a GPU runner). This plugin, selected with
``"environment_type": "kernelwatch"`` and ``"plugins": [".harness.asv_env"]``
in ``asv.conf.json``, does neither: for each commit it checks the project out
into asv's build folder (asv's own ``repo.checkout``) and runs benchmarks with
the current interpreter and ``ASV_PYTHONPATH`` pointing at that checkout, so
``import kernels`` / ``import harness`` load the commit's code while torch,
Triton and CuPy are the runner's own. Nothing is installed.

The environment's name is ``kernelwatch-py<X.Y>``, independent of the
interpreter's path, so two runners of the same GPU share series.

``KERNELWATCH_SITE_DIRS`` (folders separated by ``os.pathsep``) are appended to
``ASV_PYTHONPATH`` after the checkout: packages installed with ``pip install
--target`` (what ``scripts/gpu_run.sh`` does on an externally managed Python,
PEP 668) then reach asv's benchmark processes, whose bare ``PYTHONPATH`` asv
replaces with ``ASV_PYTHONPATH``.
"""

from __future__ import annotations

import os
import sys

from asv import util
from asv.console import log
from asv.environment import Environment


def asv_pythonpath(checkout: str, environ=None) -> str:
    """``ASV_PYTHONPATH`` for a commit: its checkout first (the commit's code
    wins), then every existing folder of ``KERNELWATCH_SITE_DIRS``."""
    environ = os.environ if environ is None else environ
    extra = [d for d in environ.get("KERNELWATCH_SITE_DIRS", "").split(os.pathsep) if d and os.path.isdir(d)]
    return os.pathsep.join([checkout] + [d for d in extra if d != checkout])


class KernelwatchEnvironment(Environment):
    tool_name = "kernelwatch"
    # Only used when asv.conf.json asks for it by name.
    matches_python_fallback = False

    def __init__(self, conf, python, requirements, tagged_env_vars):
        self._executable = sys.executable
        self._python = f"{sys.version_info[0]}.{sys.version_info[1]}"
        # Requirements are the runner's business: never install anything.
        self._requirements = {}
        super().__init__(conf, self._python, {}, tagged_env_vars)
        self._requirements = {}
        self._base_requirements = {}

    @classmethod
    def matches(cls, python):
        return python in ("same", f"{sys.version_info[0]}.{sys.version_info[1]}")

    def check_presence(self):
        return os.path.isdir(self._path)

    def create(self):
        os.makedirs(self._path, exist_ok=True)

    def _setup(self):
        os.makedirs(self._path, exist_ok=True)

    def install_project(self, conf, repo, commit_hash):
        """Check ``commit_hash`` out into the build folder and point imports at it."""
        self.create()
        self.checkout_project(repo, commit_hash)
        path = self._build_root
        if self._repo_subdir:
            path = os.path.join(path, self._repo_subdir)
        self._global_env_vars["ASV_PYTHONPATH"] = asv_pythonpath(path)
        log.info(f"kernelwatch: {commit_hash[:8]} checked out at {path}; using {self._executable}")

    def _uninstall_project(self):
        pass

    def can_install_project(self):
        return True

    def find_executable(self, executable):
        if executable in ("python", "python3", os.path.basename(self._executable)):
            return self._executable
        return util.which(executable)

    def run(self, args, **kwargs):
        log.debug(f"Running '{' '.join(args)}' in {self.name}")
        return self.run_executable("python", args, **kwargs)

    def run_executable(self, executable, args, **kwargs):
        env = kwargs.pop("env", os.environ).copy()
        env.update(self._global_env_vars)
        if "ASV_PYTHONPATH" in env:
            # Keep ASV_PYTHONPATH: asv's benchmark.py puts it first on sys.path and
            # strips a bare PYTHONPATH, which would leave the editable install (the
            # working tree's code) to answer ``import kernels`` for every commit.
            env["PYTHONPATH"] = env["ASV_PYTHONPATH"]
        else:
            env.pop("PYTHONPATH", None)
        kwargs["env"] = env
        if kwargs.get("timeout", None) is None:
            kwargs["timeout"] = self._install_timeout
        return util.check_output([self.find_executable(executable)] + list(args), **kwargs)
