"""The official Kubernetes Python client's exec and port-forward (kubernetes.stream).

Usage: python test_stream.py KUBECONFIG

Needs a node host running node `node-0`. Creates a pod bound to it (a container declaring port
8080) and waits for it to run, then: `stream(connect_get_namespaced_pod_exec, …)` with the
client's v4.channel.k8s.io returning output and exit codes (`returncode` from the error
channel's Status), an executable the image lacks (an InternalError Status), and the pod's
`portforward` to the declared port (an HTTP request answered by the emulated listener, with
`Connection: close` ending the session) and to an undeclared one (refused on its error
channel). Exits 0 when every check holds. Run by cli/tests/python_client.rs.
"""

import json
import sys
import time
import traceback

from kubernetes import client, config
from kubernetes.stream import portforward, stream

NS = "default"
POD = "streams"


def step(name):
    print(f"== {name}", flush=True)


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def create_pod(core):
    step("a pod on node-0")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": POD},
        "spec": {
            "nodeName": "node-0",
            "containers": [
                {
                    "name": "web",
                    "image": "nginx:1.27",
                    "ports": [{"containerPort": 8080}],
                    "env": [{"name": "GREETING", "value": "hi there"}],
                }
            ],
        },
    }
    core.create_namespaced_pod(NS, pod)
    deadline = time.time() + 60
    while time.time() < deadline:
        if core.read_namespaced_pod(POD, NS).status.phase == "Running":
            return
        time.sleep(0.5)
    raise AssertionError("the pod did not start running within 60 s")


def exec_in(core, command):
    resp = stream(
        core.connect_get_namespaced_pod_exec,
        POD,
        NS,
        command=command,
        stderr=True,
        stdin=False,
        stdout=True,
        tty=False,
        _preload_content=False,
    )
    resp.run_forever(timeout=30)
    out = resp.read_stdout() or ""
    err = resp.read_stderr() or ""
    return resp, out, err


def test_exec(core):
    step("exec: output and exit code 0")
    resp, out, err = exec_in(core, ["sh", "-c", "echo $GREETING; echo to-stderr >&2"])
    check(out == "hi there\n", f"stdout {out!r}")
    check(err == "to-stderr\n", f"stderr {err!r}")
    check(resp.returncode == 0, f"returncode {resp.returncode}")

    step("exec: a non-zero exit code")
    resp, out, _ = exec_in(core, ["/bin/sh", "-c", "echo before; exit 7"])
    check(out == "before\n", f"stdout {out!r}")
    check(resp.returncode == 7, f"returncode {resp.returncode}")

    step("exec: the error channel's Status as the runtime writes it")
    resp, _, _ = exec_in(core, ["sh", "-c", "exit 2"])
    status = json.loads(resp.read_channel(3))
    check(status["status"] == "Failure" and status["reason"] == "NonZeroExitCode", f"{status}")
    check(status["details"]["causes"] == [{"reason": "ExitCode", "message": "2"}], f"{status}")

    step("exec: the preloaded form returns stdout")
    out = stream(
        core.connect_get_namespaced_pod_exec,
        POD,
        NS,
        command=["hostname"],
        stderr=True,
        stdin=False,
        stdout=True,
        tty=False,
    )
    check(out == f"{POD}\n", f"hostname {out!r}")

    step("exec: an executable the image lacks")
    resp, _, _ = exec_in(core, ["foo"])
    status = json.loads(resp.read_channel(3))
    check(status["status"] == "Failure", f"status {status}")
    check(status["reason"] == "InternalError" and status["code"] == 500, f"status {status}")
    check(
        'exec: "foo": executable file not found in $PATH' in status["message"],
        f"message {status['message']}",
    )


def test_port_forward(core):
    step("port-forward: an HTTP request to a declared port")
    pf = portforward(core.connect_get_namespaced_pod_portforward, POD, NS, ports="8080")
    sock = pf.socket(8080)
    sock.setblocking(True)
    sock.sendall(b"GET /hello HTTP/1.1\r\nHost: pod\r\nConnection: close\r\n\r\n")
    reply = b""
    deadline = time.time() + 30
    while time.time() < deadline:
        data = sock.recv(4096)
        if not data:
            break
        reply += data
    sock.close()
    text = reply.decode()
    check(text.startswith("HTTP/1.1 200 OK\r\n"), f"reply {text!r}")
    check(
        text.endswith(f"pod {POD} in namespace {NS}, container web, port 8080: GET /hello HTTP/1.1\n"),
        f"reply {text!r}",
    )
    check(pf.error(8080) is None, f"error {pf.error(8080)!r}")
    pf.close()

    step("port-forward: an undeclared port is refused")
    pf = portforward(core.connect_get_namespaced_pod_portforward, POD, NS, ports="9999")
    sock = pf.socket(9999)
    sock.setblocking(True)
    data = sock.recv(4096)
    check(data == b"", f"data {data!r}")
    error = pf.error(9999) or ""
    check("connection refused" in error and "port 9999" in error, f"error {error!r}")
    pf.close()


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    configuration = client.Configuration()
    config.load_kube_config(config_file=sys.argv[1], client_configuration=configuration)
    core = client.CoreV1Api(client.ApiClient(configuration))
    try:
        create_pod(core)
        test_exec(core)
        test_port_forward(core)
    except Exception:  # noqa: BLE001 - any failure is the test's failure
        traceback.print_exc()
        return 1
    print("python streams: all checks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
