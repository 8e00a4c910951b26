"""bubblewrap's command line is built in one place for both sandboxes: the identity and the
namespaces are the same for each, the mounts come in the caller's order, then the whole
environment and the working directory; as root, every bind comes from where the sandbox's
host user finds it."""

from __future__ import annotations

from trace_gym.sandbox import bwrap, hostuser, jail
from trace_gym.sandbox.isolation import Isolation, worker_command

HEAD = ["--unshare-all", "--unshare-user", "--uid", "65534", "--gid", "65534", "--cap-drop", "ALL",
        "--die-with-parent", "--new-session", "--proc", "/proc", *hostuser.PROC_READ_ONLY, "--dev", "/dev"]


def test_the_identity_comes_first_then_the_mounts_in_order_then_the_environment(monkeypatch):
    monkeypatch.setattr(hostuser, "drops_privileges", lambda: False)
    mounts = [bwrap.tmpfs("/tmp", 10), bwrap.ro_bind("/usr"), bwrap.bind("/x", "/repo"), bwrap.ro_bind("/y", "/opt/y"),
              bwrap.symlink("usr/lib", "/lib"), bwrap.tmpfs("/z"), bwrap.remount_ro("/")]
    argv, entry = bwrap.command_line("/bin/bwrap", mounts, env={"A": "1", "B": "2"}, chdir="/repo")
    assert entry is None
    assert argv == ["/bin/bwrap", *HEAD, "--size", "10", "--tmpfs", "/tmp", "--ro-bind", "/usr", "/usr",
                    "--bind", "/x", "/repo", "--ro-bind", "/y", "/opt/y", "--symlink", "usr/lib", "/lib",
                    "--tmpfs", "/z", "--remount-ro", "/", "--clearenv", "--setenv", "A", "1", "--setenv", "B", "2",
                    "--chdir", "/repo"]
    closed, _ = bwrap.command_line("/bin/bwrap", [], env={}, chdir="/", nested_userns=False)
    assert closed == ["/bin/bwrap", *HEAD[:2], "--disable-userns", *HEAD[2:], "--clearenv", "--chdir", "/"]


def test_as_root_each_bind_comes_from_where_the_sandbox_user_finds_it(monkeypatch):
    monkeypatch.setattr(hostuser, "drops_privileges", lambda: True)
    entry = hostuser.Entry((("/root/secret", "/staged/d0"),))
    monkeypatch.setattr(hostuser, "stage", lambda paths: ({p: "/staged/d0" if p == "/root/secret" else p
                                                           for p in paths}, entry))
    argv, got = bwrap.command_line("bwrap", [bwrap.ro_bind("/root/secret", "/opt/s"), bwrap.ro_bind("/usr")],
                                   env={}, chdir="/")
    assert got == entry
    assert argv[-9:] == ["--ro-bind", "/staged/d0", "/opt/s", "--ro-bind", "/usr", "/usr", "--clearenv", "--chdir", "/"]


def test_the_env_worker_and_the_command_jail_both_build_it_here(monkeypatch, tmp_path):
    monkeypatch.setattr(hostuser, "drops_privileges", lambda: False)
    made = []
    build = bwrap.command_line
    monkeypatch.setattr(bwrap, "command_line", lambda *a, **k: made.append(k) or build(*a, **k))
    worker = worker_command(Isolation("bubblewrap", True)).argv
    command, _ = jail._sandbox_argv(str(tmp_path), (), ["true"], jail.CommandLimits())
    assert [(k["chdir"], k.get("nested_userns", True)) for k in made] == [("/tmp", True), ("/repo", False)]
    assert worker[1:len(HEAD) + 1] == HEAD  # the same identity and namespaces; the jail refuses nested ones
    assert command[1:len(HEAD) + 2] == [*HEAD[:2], "--disable-userns", *HEAD[2:]]
