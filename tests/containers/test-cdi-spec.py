#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""`kfdbrokerctl cdi`: the spec validates against the CDI 0.4.0 JSON schema
(vendored in cdi-schema-v0.4.0/), mounts exactly the broker's socket with the
options we chose, gives the container KFDBROKER_SOCKET and no device node, and
bad input gets a clear message and exit status. Prints TAP.

Environment (set by meson): KFDBROKERCTL, the binary under test.
Needs python3-jsonschema; without it the whole file is skipped, saying so.
"""
import json
import os
import re
import socket
import stat
import subprocess
import sys
import tempfile
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA_DIR = os.path.join(HERE, "cdi-schema-v0.4.0")
CTL = os.environ.get("KFDBROKERCTL", "")
# kfdbroker-run and libkfdbroker-kfd.so in the build tree.
ROCM_DIR = os.environ.get("KFDBROKER_ROCM_DIR", "")
ROCM_CONTAINER_DIR = "/opt/kfdbroker"
ROCM_OPTIONS = ["bind", "ro", "nosuid", "nodev"]
CONTAINER_SOCKET = "/run/kfdbroker/kfdbroker.sock"
OPTIONS = ["bind", "nosuid", "nodev", "noexec"]

try:
    import jsonschema
except ImportError:
    print("1..0 # SKIP python3-jsonschema is not installed (apt-get install python3-jsonschema)")
    sys.exit(0)


def run_ctl(*args, env=None, cwd=None, rocm_dir=True):
    """Runs kfdbrokerctl; `cdi` takes the build tree's ROCm files (--rocm-dir
    right after it) unless rocm_dir is False or another directory."""
    e = dict(os.environ)
    e.pop("KFDBROKER_SOCKET", None)
    e.update(env or {})
    args = list(args)
    if rocm_dir and "cdi" in args:
        args.insert(args.index("cdi") + 1, "--rocm-dir=" + (ROCM_DIR if rocm_dir is True else rocm_dir))
    # The sockets here are no daemons: do not ask them how many GPUs they
    # serve (test-gpus asks a real one).
    if "cdi" in args:
        args.insert(args.index("cdi") + 1, "--from-sockets")
    p = subprocess.run([CTL, *args], capture_output=True, env=e, cwd=cwd, timeout=30)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def spec_for(sock, *extra, **kw):
    rc, out, err = run_ctl("--socket", sock, "cdi", *extra, **kw)
    assert rc == 0, f"exit status {rc}, stderr: {err}"
    return json.loads(out), out, err


def validator():
    with open(os.path.join(SCHEMA_DIR, "schema.json")) as f:
        schema = json.load(f)
    with open(os.path.join(SCHEMA_DIR, "defs.json")) as f:
        defs = json.load(f)
    base = "file://" + SCHEMA_DIR + "/schema.json"
    resolver = jsonschema.RefResolver(base, schema, store={"file://" + SCHEMA_DIR + "/defs.json": defs})
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema, resolver=resolver)


def schema_errors(doc):
    return sorted(e.message for e in validator().iter_errors(doc))


def listening_socket(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.bind(path)
    s.listen(1)
    return s


# ---- tests ----

def test_spec_validates_against_the_cdi_0_4_0_schema(tmp):
    sock = os.path.join(tmp, "kfdbroker.sock")
    ls = listening_socket(sock)
    doc, _, err = spec_for(sock)
    ls.close()
    assert err == "", f"a listening socket gets no warning, got: {err}"
    assert doc["cdiVersion"] == "0.4.0", doc["cdiVersion"]
    errors = schema_errors(doc)
    assert errors == [], errors


def test_schema_rejects_broken_specs(tmp):
    """The validator really loads the schema and its defs.json: these fail."""
    doc, _, _ = spec_for(os.path.join(tmp, "s.sock"))
    mount = doc["devices"][0]["containerEdits"]["mounts"][0]

    no_dest = json.loads(json.dumps(doc))
    del no_dest["devices"][0]["containerEdits"]["mounts"][0]["containerPath"]
    assert "'containerPath' is a required property" in schema_errors(no_dest)

    options_string = json.loads(json.dumps(doc))
    options_string["devices"][0]["containerEdits"]["mounts"][0]["options"] = "bind"
    assert "'bind' is not of type 'array'" in schema_errors(options_string), schema_errors(options_string)

    no_devices = {k: v for k, v in doc.items() if k != "devices"}
    assert "'devices' is a required property" in schema_errors(no_devices)
    assert mount["options"] == OPTIONS


def test_kind_and_device_name_follow_the_cdi_syntax(tmp):
    doc, _, _ = spec_for(os.path.join(tmp, "s.sock"))
    # SPEC.md v0.4.0: kind = DNS subdomain "/" name; names alphanumeric at
    # both ends with - _ . inside, at most 63 characters.
    label = r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"
    name = r"[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?"
    assert re.fullmatch(rf"{label}(\.{label})*/{name}", doc["kind"]), doc["kind"]
    assert doc["kind"] == "kfdbroker.org/gpu"
    assert [d["name"] for d in doc["devices"]] == ["all", "rocm"]
    assert all(re.fullmatch(name, d["name"]) for d in doc["devices"])


def test_a_device_per_gpu_socket_beside_the_socket(tmp):
    sock = os.path.join(tmp, "kfdbroker.sock")
    keep = [listening_socket(p) for p in (sock, os.path.join(tmp, "kfdbroker-gpu0.sock"),
                                          os.path.join(tmp, "kfdbroker-gpu1.sock"))]
    doc, _, _ = spec_for(sock)
    assert [d["name"] for d in doc["devices"]] == ["all", "rocm", "0", "1"]
    for k in (0, 1):
        mounts = device(doc, str(k))["mounts"]
        assert mounts[0] == {
            "hostPath": os.path.join(tmp, f"kfdbroker-gpu{k}.sock"),
            "containerPath": CONTAINER_SOCKET,
            "type": "bind",
            "options": OPTIONS,
        }, mounts
        assert [m["containerPath"] for m in mounts[1:]] == [m["containerPath"] for m in device(doc, "rocm")["mounts"][1:]]
        assert device(doc, str(k))["env"] == device(doc, "all")["env"]
    assert schema_errors(doc) == []
    for s in keep:
        s.close()


def test_mounts_the_socket_and_nothing_from_dev(tmp):
    sock = os.path.join(tmp, "kfdbroker.sock")
    doc, _, _ = spec_for(sock)
    edits = doc["devices"][0]["containerEdits"]
    assert edits["mounts"] == [{
        "hostPath": sock,
        "containerPath": CONTAINER_SOCKET,
        "type": "bind",
        "options": OPTIONS,
    }], edits["mounts"]
    assert set(edits) == {"env", "mounts"}, f"unexpected edits: {sorted(edits)}"
    assert "containerEdits" not in doc, "no spec-wide edits"
    text = json.dumps(doc)
    assert "/dev/" not in text and "deviceNodes" not in text and "hooks" not in text, text


def test_env_names_the_socket_in_the_container(tmp):
    doc, _, _ = spec_for(os.path.join(tmp, "s.sock"))
    env = doc["devices"][0]["containerEdits"]["env"]
    assert env == ["KFDBROKER_SOCKET=" + CONTAINER_SOCKET], env
    # The schema does not check env items (its "ref" lacks the "$"); CDI wants VAR=VALUE.
    assert all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", e) for e in env), env


def test_socket_path_from_env_and_relative_paths(tmp):
    sock = os.path.join(tmp, "from-env.sock")
    rc, out, err = run_ctl("cdi", env={"KFDBROKER_SOCKET": sock})
    assert rc == 0, err
    assert json.loads(out)["devices"][0]["containerEdits"]["mounts"][0]["hostPath"] == sock

    # A relative path becomes absolute against the working directory.
    rc, out, err = run_ctl("--socket", "sub/k.sock", "cdi", cwd=tmp)
    assert rc == 0, err
    assert json.loads(out)["devices"][0]["containerEdits"]["mounts"][0]["hostPath"] == tmp + "/sub/k.sock"

    # Quotes and backslashes survive the JSON round trip.
    odd = os.path.join(tmp, 'a"b\\c.sock')
    doc, _, _ = spec_for(odd)
    assert doc["devices"][0]["containerEdits"]["mounts"][0]["hostPath"] == odd


def test_output_file_is_written_whole_and_readable(tmp):
    sock = os.path.join(tmp, "s.sock")
    _, stdout_text, _ = spec_for(sock)
    cdi_dir = os.path.join(tmp, "cdi")
    os.mkdir(cdi_dir)
    target = os.path.join(cdi_dir, "kfdbroker.json")
    with open(target, "w") as f:
        f.write("old contents\n")
    os.chmod(target, 0o600)
    old_umask = os.umask(0o077)
    try:
        rc, out, err = run_ctl("--socket", sock, "cdi", "--output", target)
    finally:
        os.umask(old_umask)
    assert rc == 0, err
    assert out == "", "nothing on stdout with --output"
    with open(target) as f:
        assert f.read() == stdout_text
    mode = stat.S_IMODE(os.stat(target).st_mode)
    assert mode == 0o644, oct(mode)
    assert os.listdir(cdi_dir) == ["kfdbroker.json"], f"temporary files left: {os.listdir(cdi_dir)}"
    # --output=FILE and the option after the global ones work too.
    rc, _, err = run_ctl("cdi", f"--output={target}", "--socket", sock)
    assert rc == 0, err


def test_output_into_a_missing_directory_makes_it_0755(tmp):
    """/etc/cdi or /run/cdi that nothing made yet: made, mode 0755 whatever the umask."""
    sock = os.path.join(tmp, "s.sock")
    _, stdout_text, _ = spec_for(sock)
    cdi_dir = os.path.join(tmp, "run-cdi")
    target = os.path.join(cdi_dir, "kfdbroker.json")
    old_umask = os.umask(0o077)
    try:
        rc, out, err = run_ctl("--socket", sock, "cdi", "--output", target)
    finally:
        os.umask(old_umask)
    assert rc == 0, err
    assert stat.S_IMODE(os.stat(cdi_dir).st_mode) == 0o755, oct(os.stat(cdi_dir).st_mode)
    with open(target) as f:
        assert f.read() == stdout_text
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o644
    # Once it exists, its mode is the administrator's: not changed.
    os.chmod(cdi_dir, 0o750)
    rc, _, err = run_ctl("--socket", sock, "cdi", "--output", target)
    assert rc == 0, err
    assert stat.S_IMODE(os.stat(cdi_dir).st_mode) == 0o750


def device(doc, name):
    [d] = [d for d in doc["devices"] if d["name"] == name]
    return d["containerEdits"]


def test_rocm_device_adds_kfdbroker_run_and_the_interposer_read_only(tmp):
    sock = os.path.join(tmp, "kfdbroker.sock")
    ls = listening_socket(sock)
    doc, _, err = spec_for(sock)
    ls.close()
    assert err == "", f"present files get no warning, got: {err}"
    edits = device(doc, "rocm")
    assert set(edits) == {"env", "mounts"}, f"unexpected edits: {sorted(edits)}"
    # Everything the native device gives, unchanged, then the two files.
    assert edits["env"] == device(doc, "all")["env"], edits["env"]
    assert edits["mounts"][0] == device(doc, "all")["mounts"][0], edits["mounts"]
    assert edits["mounts"][1:] == [{
        "hostPath": os.path.join(ROCM_DIR, name),
        "containerPath": ROCM_CONTAINER_DIR + "/" + name,
        "type": "bind",
        "options": ROCM_OPTIONS,
    } for name in ("kfdbroker-run", "libkfdbroker-kfd.so")], edits["mounts"]
    # No LD_PRELOAD (docs/containers.md: it would load into every process of the image).
    assert not any(e.startswith("LD_PRELOAD=") for e in edits["env"]), edits["env"]
    assert "/dev/" not in json.dumps(edits), edits


def test_rocm_files_default_to_the_installed_ones_and_are_warned_about(tmp):
    sock = os.path.join(tmp, "kfdbroker.sock")
    ls = listening_socket(sock)
    rc, out, err = run_ctl("--socket", sock, "cdi", rocm_dir=False)
    ls.close()
    assert rc == 0, err
    mounts = device(json.loads(out), "rocm")["mounts"]
    run, lib = mounts[1]["hostPath"], mounts[2]["hostPath"]
    assert run.startswith("/") and run.endswith("/bin/kfdbroker-run"), run
    assert lib.startswith("/") and lib.endswith("/libkfdbroker-kfd.so"), lib
    for path in (run, lib):
        if not os.path.exists(path):
            assert (f"kfdbrokerctl cdi: warning: {path} does not exist (No such file or directory); a container "
                    "asking for kfdbroker.org/gpu=rocm cannot start until it does\n") in err, err

    # A relative --rocm-dir is made absolute; a directory without the files is named.
    os.mkdir(os.path.join(tmp, "empty"))
    rc, out, err = run_ctl("--socket", sock, "cdi", cwd=tmp, rocm_dir="empty")
    assert rc == 0, err
    mounts = device(json.loads(out), "rocm")["mounts"]
    assert [m["hostPath"] for m in mounts[1:]] == [tmp + "/empty/kfdbroker-run", tmp + "/empty/libkfdbroker-kfd.so"]
    assert f"warning: {tmp}/empty/kfdbroker-run does not exist" in err, err
    assert f"warning: {tmp}/empty/libkfdbroker-kfd.so does not exist" in err, err
    # A directory where a file should be.
    os.mkdir(os.path.join(tmp, "odd"))
    os.mkdir(os.path.join(tmp, "odd", "kfdbroker-run"))
    rc, out, err = run_ctl("--socket", sock, "cdi", rocm_dir=tmp + "/odd")
    assert rc == 0, err
    assert (f"kfdbrokerctl cdi: warning: {tmp}/odd/kfdbroker-run is not a regular file; the "
            "kfdbroker.org/gpu=rocm device will not work\n") in err, err


def test_warns_when_nothing_listens(tmp):
    missing = os.path.join(tmp, "missing.sock")
    rc, out, err = run_ctl("--socket", missing, "cdi")
    assert rc == 0 and json.loads(out), err
    assert err == (f"kfdbrokerctl cdi: warning: {missing} does not exist yet (No such file or directory); "
                   "a container using the spec cannot start until kfdbrokerd listens there\n"), err

    regular = os.path.join(tmp, "regular")
    open(regular, "w").close()
    rc, out, err = run_ctl("--socket", regular, "cdi")
    assert rc == 0, err
    assert err == (f"kfdbrokerctl cdi: warning: {regular} is not a socket; a container using the spec "
                   "will not reach kfdbrokerd\n"), err


def test_bad_input_is_named(tmp):
    sock = os.path.join(tmp, "s.sock")
    cases = [
        (["--socket", sock, "cdi", "extra"], 2, "kfdbrokerctl cdi: unexpected argument 'extra'\n"),
        (["--socket", sock, "cdi", "--output="], 2, "kfdbrokerctl cdi: --output needs a file name\n"),
        (["--socket", sock, "cdi", "--output", os.path.join(tmp, "no/such/dir/k.json")], 1,
         f"cannot write {tmp}/no/such/dir/k.json: cannot make its directory {tmp}/no/such/dir: "
         "No such file or directory\n"),
        (["--socket", "", "cdi"], 2, "kfdbrokerctl cdi: the socket path is empty\n"),
        (["--socket", sock, "cdi", "--rocm-dir="], 2, "kfdbrokerctl cdi: --rocm-dir needs a directory\n"),
        (["--socket", sock, "cdi", "--rocm-dir"], 2, "option '--rocm-dir' requires an argument"),
        (["--socket", sock, "cdi", "--bogus"], 2, "unrecognized option '--bogus'"),
    ]
    for args, want_rc, want_err in cases:
        rc, out, err = run_ctl(*args)
        assert rc == want_rc, f"{args}: exit status {rc}, want {want_rc}; stderr: {err}"
        assert want_err in err, f"{args}: stderr {err!r} lacks {want_err!r}"
        assert out == "", f"{args}: nothing on stdout, got {out!r}"
    # Bytes that are not UTF-8 cannot go into JSON.
    p = subprocess.run([CTL, "--socket", b"/tmp/\xff.sock", "cdi"], capture_output=True, timeout=30)
    assert p.returncode == 2, p.returncode
    assert p.stderr == b"kfdbrokerctl cdi: the socket path is not valid UTF-8, which a CDI spec (JSON) cannot hold\n", \
        p.stderr
    p = subprocess.run([CTL, "--socket", sock, "cdi", "--rocm-dir", b"/tmp/\xff"], capture_output=True, timeout=30)
    assert p.returncode == 2, p.returncode
    assert p.stderr == (b"kfdbrokerctl cdi: the --rocm-dir path is not valid UTF-8, which a CDI spec (JSON) "
                        b"cannot hold\n"), p.stderr


def main():
    if not CTL or not ROCM_DIR:
        print("1..0 # SKIP KFDBROKERCTL or KFDBROKER_ROCM_DIR is not set (run through meson test)")
        return 0
    tests = [(n, f) for n, f in globals().items() if n.startswith("test_")]
    print(f"1..{len(tests)}")
    failed = 0
    for i, (name, fn) in enumerate(tests, 1):
        with tempfile.TemporaryDirectory(prefix="kfdbroker-cdi-") as tmp:
            try:
                fn(tmp)
                print(f"ok {i} - {name}")
            except Exception:
                failed += 1
                print(f"not ok {i} - {name}")
                for line in traceback.format_exc().splitlines():
                    print("# " + line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
