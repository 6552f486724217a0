//! `kubectl exec` and `kubectl attach` (kubectl 1.37.1, WebSocket `v5.channel.k8s.io`) against
//! a store, an API server and a node host running the pods: output and exit codes of the
//! emulated shell, an executable the image lacks, stdin with `-i`, a mounted ConfigMap key,
//! attach with stdin to a `cat` or a shell (and `kubectl run -i --rm`),
//! the container's environment, and Kubernetes' errors for a missing pod, a wrong container
//! and a container that is not running; `kubectl port-forward` (SPDY/3.1 tunnelled in a
//! WebSocket) to a declared port and to one nothing listens on. The same over a plain SPDY/3.1
//! upgrade, as client-go before 1.30 speaks it (kubectl with
//! `KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false` and `KUBECTL_PORT_FORWARD_WEBSOCKETS=false`).

use crate::common;

use std::io::{BufRead, BufReader};
use std::time::Duration;

use common::control_plane::start_node_host;
use common::{wait_until, Cluster};

const PODS: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  greeting: hello from a configmap
---
apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  nodeName: node-0
  containers:
  - name: app
    image: registry.k8s.io/pause:3.10
    ports:
    - containerPort: 8080
    env:
    - name: MODE
      value: testing
    - name: POD_NAME
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
    volumeMounts:
    - name: settings
      mountPath: /etc/settings
  volumes:
  - name: settings
    configMap:
      name: settings
---
apiVersion: v1
kind: Pod
metadata:
  name: ticker
spec:
  nodeName: node-0
  containers:
  - name: main
    image: busybox:1.36
    command: [sh, -c, 'while true; do echo tick; sleep 1; done']
---
apiVersion: v1
kind: Pod
metadata:
  name: stranded
spec:
  nodeName: no-such-node
  containers:
  - name: app
    image: registry.k8s.io/pause:3.10
";

/// Pods whose main process reads stdin.
const INTERACTIVE: &str = "apiVersion: v1
kind: Pod
metadata:
  name: echo
spec:
  nodeName: node-0
  containers:
  - name: echo
    image: busybox:1.36
    args: [cat]
    stdin: true
---
apiVersion: v1
kind: Pod
metadata:
  name: shell
spec:
  nodeName: node-0
  containers:
  - name: shell
    image: busybox:1.36
    command: [/bin/sh]
    stdin: true
";

/// `kubectl attach -i` with `input` on stdin; its output, whatever the exit code.
fn attach_with_stdin(c: &Cluster, pod: &str, input: &str) -> std::process::Output {
    use std::io::Write;
    let mut child = std::process::Command::new(common::kubectl_path())
        .arg("--cache-dir")
        .arg(c.dir.path().join("kube-cache"))
        .args(["attach", "-i", pod])
        .env("KUBECONFIG", &c.kubeconfig)
        .env("HOME", c.dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(input.as_bytes());
    }
    child.wait_with_output().expect("kubectl ends")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_exec_and_attach_reach_emulated_containers() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let _host = start_node_host(&c, 1, 1, "node-")?;
    c.ok_stdin(&["apply", "-f", "-"], PODS);
    wait_until("web and ticker run", Duration::from_secs(60), || async {
        let out = c.kubectl(&["get", "pods", "web", "ticker", "--no-headers"]);
        text(&out.stdout).matches(" Running ").count() == 2
    })
    .await?;

    // Output, then the exit code kubectl takes from the error channel.
    let out = c.kubectl(&[
        "exec",
        "web",
        "--",
        "sh",
        "-c",
        "echo hi; echo oops >&2; exit 3",
    ]);
    assert_eq!(text(&out.stdout), "hi\n");
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("oops\n"), "{stderr}");
    assert!(
        stderr.contains("command terminated with exit code 3"),
        "{stderr}"
    );

    // An executable the image does not have fails as containerd's exec does.
    let stderr = c.fails(&["exec", "web", "--", "foo"]);
    assert!(
        stderr.contains("Internal error occurred: error executing command in container: failed to exec in container: failed to start exec")
            && stderr.contains("exec: \"foo\": executable file not found in $PATH: unknown"),
        "{stderr}"
    );
    let out = c.kubectl(&["exec", "web", "--", "sh", "-c", "foo"]);
    assert_eq!(out.status.code(), Some(127));
    assert!(text(&out.stderr).contains("sh: foo: not found"));

    // A mounted ConfigMap key, the environment and the hostname.
    assert_eq!(
        c.ok(&["exec", "web", "--", "cat", "/etc/settings/greeting"]),
        "hello from a configmap"
    );
    let env = c.ok(&["exec", "web", "-c", "app", "--", "env"]);
    assert!(env.starts_with("PATH=/usr/local/sbin:"), "{env}");
    for line in [
        "HOSTNAME=web\n",
        "MODE=testing\n",
        "POD_NAME=web\n",
        "HOME=/root\n",
    ] {
        assert!(env.contains(line), "{line} in {env}");
    }
    assert_eq!(c.ok(&["exec", "web", "--", "hostname"]), "web\n");

    // stdin with -i: cat copies it until kubectl closes stdin (v5's close signal).
    let copied = c.ok_stdin(&["exec", "-i", "web", "--", "cat"], "line one\nline two\n");
    assert_eq!(copied, "line one\nline two\n");

    // Kubernetes' errors before the upgrade.
    let stderr = c.fails(&["exec", "missing", "--", "true"]);
    assert!(
        stderr.contains("Error from server (NotFound): pods \"missing\" not found"),
        "{stderr}"
    );
    let stderr = c.fails(&["exec", "web", "-c", "nope", "--", "true"]);
    assert!(
        stderr.contains("container nope is not valid for pod web"),
        "{stderr}"
    );
    let stderr = c.fails(&["exec", "stranded", "--", "true"]);
    assert!(
        stderr.contains("error: unable to upgrade connection: container not found (\"app\")"),
        "{stderr}"
    );

    // port-forward: kubectl's SPDY tunnel to the emulated server behind the declared port.
    let mut forward = c.spawn(&["port-forward", "pod/web", ":8080", ":9999"]);
    let lines = stdout_lines(&mut forward);
    let replies = forwarded_ports(&lines).and_then(|local| {
        Ok([
            http_get(local["8080"])?,
            http_get(local["8080"])?,
            http_get(local["9999"])?,
        ])
    });
    let _ = forward.kill();
    let out = forward.wait_with_output()?;
    let [first, second, refused] = replies?;
    for reply in [first, second] {
        assert!(reply.starts_with("HTTP/1.1 200 OK\r\n"), "{reply}");
        assert!(
            reply.ends_with(
                "pod web in namespace default, container app, port 8080: GET /hello HTTP/1.1\n"
            ),
            "{reply}"
        );
    }
    // Nothing listens on 9999: the connection ends with nothing, kubectl reports the refusal.
    assert_eq!(refused, "");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("error forwarding port 9999 to pod web_default")
            && stderr.contains("connect: connection refused"),
        "{stderr}"
    );

    // Attach: the main process's output from now on.
    let mut attach = c.spawn(&["attach", "ticker"]);
    let rx = stdout_lines(&mut attach);
    let first = rx.recv_timeout(Duration::from_secs(20));
    let _ = attach.kill();
    let _ = attach.wait();
    assert_eq!(first.ok().as_deref(), Some("tick"));

    // Attach with stdin to a main process that reads it: cat echoes it, a shell runs it.
    c.ok_stdin(&["apply", "-f", "-"], INTERACTIVE);
    wait_until("echo and shell run", Duration::from_secs(60), || async {
        let out = c.kubectl(&["get", "pods", "echo", "shell", "--no-headers"]);
        text(&out.stdout).matches(" Running ").count() == 2
    })
    .await?;
    let echoed = c.ok_stdin(&["attach", "-i", "echo"], "hello\nagain\n");
    assert_eq!(echoed, "hello\nagain\n");
    let out = attach_with_stdin(&c, "shell", "echo from $HOSTNAME\nexit 4\n");
    assert_eq!(text(&out.stdout), "from shell\n", "{}", text(&out.stderr));
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    // stdin to a process that reads none is accepted and dropped.
    let mut ignored = c.spawn(&["attach", "-i", "ticker"]);
    let rx = stdout_lines(&mut ignored);
    let first = rx.recv_timeout(Duration::from_secs(20));
    let _ = ignored.kill();
    let _ = ignored.wait();
    assert_eq!(first.ok().as_deref(), Some("tick"));
    // kubectl run -i --rm: the pod's cat answers, then kubectl deletes the pod.
    let out = c.ok_stdin(
        &[
            "run",
            "once",
            "-i",
            "--rm",
            "--image=busybox:1.36",
            // No scheduler runs here: the pod is placed on the node host's node.
            r#"--overrides={"spec":{"nodeName":"node-0"}}"#,
            "--",
            "cat",
        ],
        "one line\n",
    );
    assert!(out.starts_with("one line\n"), "{out}");
    assert!(out.contains("pod \"once\" deleted"), "{out}");

    c.api.stop().await;
    c.store.stop().await;
    Ok(())
}

/// kubectl made to speak plain SPDY/3.1 for exec, attach and port-forward.
fn spdy_kubectl(c: &Cluster, args: &[&str]) -> std::process::Command {
    let mut command = std::process::Command::new(common::kubectl_path());
    command
        .arg("--cache-dir")
        .arg(c.dir.path().join("kube-cache"))
        .args(args)
        .env("KUBECONFIG", &c.kubeconfig)
        .env("HOME", c.dir.path())
        .env("KUBECTL_REMOTE_COMMAND_WEBSOCKETS", "false")
        .env("KUBECTL_PORT_FORWARD_WEBSOCKETS", "false")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    command
}

/// Runs kubectl over SPDY with `input` on stdin; its output, whatever the exit code.
fn spdy_run(c: &Cluster, args: &[&str], input: &str) -> std::process::Output {
    use std::io::Write;
    let mut child = spdy_kubectl(c, args)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(input.as_bytes());
    }
    child.wait_with_output().expect("kubectl ends")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_over_plain_spdy_reaches_emulated_containers() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let _host = start_node_host(&c, 1, 1, "node-")?;
    c.ok_stdin(&["apply", "-f", "-"], PODS);
    wait_until("web and ticker run", Duration::from_secs(60), || async {
        let out = c.kubectl(&["get", "pods", "web", "ticker", "--no-headers"]);
        text(&out.stdout).matches(" Running ").count() == 2
    })
    .await?;

    // Output on the stdout and stderr streams; the exit code from the error stream (v4).
    let out = spdy_run(
        &c,
        &[
            "exec",
            "web",
            "--",
            "sh",
            "-c",
            "echo hi; echo oops >&2; exit 3",
        ],
        "",
    );
    let stderr = text(&out.stderr);
    assert_eq!(text(&out.stdout), "hi\n", "{stderr}");
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("oops\n"), "{stderr}");
    assert!(
        stderr.contains("command terminated with exit code 3"),
        "{stderr}"
    );
    let out = spdy_run(
        &c,
        &["exec", "web", "--", "cat", "/etc/settings/greeting"],
        "",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "hello from a configmap");
    // An executable the image lacks: the runtime's error, as over a WebSocket.
    let out = spdy_run(&c, &["exec", "web", "--", "foo"], "");
    let stderr = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("exec: \"foo\": executable file not found in $PATH: unknown"),
        "{stderr}"
    );
    // stdin with -i: the stdin stream's half-close ends cat's input.
    let out = spdy_run(
        &c,
        &["exec", "-i", "web", "--", "cat"],
        "line one\nline two\n",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "line one\nline two\n");
    // Well over SPDY/3.1's 64 KiB windows each way: 1 MiB through cat and back.
    let big: String = (0..16_384).map(|i| format!("{i:063}\n")).collect();
    let out = spdy_run_large(&c, &["exec", "-i", "web", "--", "cat"], big.as_bytes());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(out.stdout.len(), big.len());
    assert!(out.stdout == big.as_bytes(), "the echo differs");

    // Attach follows the main process over SPDY too.
    let mut attach = spdy_kubectl(&c, &["attach", "ticker"])
        .stdin(std::process::Stdio::null())
        .spawn()?;
    let rx = stdout_lines(&mut attach);
    let first = rx.recv_timeout(Duration::from_secs(20));
    let _ = attach.kill();
    let _ = attach.wait();
    assert_eq!(first.ok().as_deref(), Some("tick"));

    // port-forward's SPDY session straight on the upgraded connection.
    let mut forward = spdy_kubectl(&c, &["port-forward", "pod/web", ":8080", ":9999"])
        .stdin(std::process::Stdio::null())
        .spawn()?;
    let lines = stdout_lines(&mut forward);
    let replies = forwarded_ports(&lines).and_then(|local| {
        let reply = http_get(local["8080"])?;
        // 1 MiB each way through the echoing listener, past the 64 KiB windows (before the
        // refused port, whose error ends kubectl's port-forward).
        let data: Vec<u8> = (0..1usize << 20).map(|i| (i % 251) as u8).collect();
        let echoed = echo_through(local["8080"], &data)?;
        anyhow::ensure!(
            echoed.len() == data.len(),
            "{} of {} bytes echoed",
            echoed.len(),
            data.len()
        );
        anyhow::ensure!(echoed == data, "the echo differs");
        Ok([reply, http_get(local["9999"])?])
    });
    let _ = forward.kill();
    let out = forward.wait_with_output()?;
    let [reply, refused] = replies?;
    assert!(reply.starts_with("HTTP/1.1 200 OK\r\n"), "{reply}");
    assert!(
        reply.ends_with(
            "pod web in namespace default, container app, port 8080: GET /hello HTTP/1.1\n"
        ),
        "{reply}"
    );
    assert_eq!(refused, "");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("error forwarding port 9999 to pod web_default")
            && stderr.contains("connect: connection refused"),
        "{stderr}"
    );

    c.api.stop().await;
    c.store.stop().await;
    Ok(())
}

/// Runs kubectl over SPDY with `input` written from a thread (the output is read meanwhile).
fn spdy_run_large(c: &Cluster, args: &[&str], input: &[u8]) -> std::process::Output {
    use std::io::Write;
    let mut child = spdy_kubectl(c, args)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    let writer = child.stdin.take().map(|mut stdin| {
        let input = input.to_vec();
        std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        })
    });
    let out = child.wait_with_output().expect("kubectl ends");
    if let Some(writer) = writer {
        let _ = writer.join();
    }
    out
}

/// Writes `data` to a local port from a thread, closes the sending side and reads until EOF.
fn echo_through(port: u16, data: &[u8]) -> anyhow::Result<Vec<u8>> {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port))?;
    conn.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut sending = conn.try_clone()?;
    let data = data.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = sending.write_all(&data);
        let _ = sending.shutdown(std::net::Shutdown::Write);
    });
    let mut echoed = Vec::new();
    let _ = conn.read_to_end(&mut echoed);
    let _ = writer.join();
    Ok(echoed)
}

/// A child's stdout, line by line, from a thread.
fn stdout_lines(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    if let Some(stdout) = child.stdout.take() {
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
    }
    rx
}

/// The local port of each remote port, from kubectl port-forward's
/// "Forwarding from 127.0.0.1:LOCAL -> REMOTE" lines.
fn forwarded_ports(
    lines: &std::sync::mpsc::Receiver<String>,
) -> anyhow::Result<std::collections::HashMap<String, u16>> {
    let mut local = std::collections::HashMap::new();
    while local.len() < 2 {
        let line = lines
            .recv_timeout(Duration::from_secs(20))
            .map_err(|_| anyhow::anyhow!("kubectl port-forward printed no forwarding lines"))?;
        if let Some((port, remote)) = line
            .strip_prefix("Forwarding from 127.0.0.1:")
            .and_then(|rest| rest.split_once(" -> "))
        {
            local.insert(remote.to_string(), port.parse::<u16>()?);
        }
    }
    Ok(local)
}

/// An HTTP/1.1 GET with `Connection: close` to a local port; everything read until EOF.
fn http_get(port: u16) -> anyhow::Result<String> {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port))?;
    conn.set_read_timeout(Some(Duration::from_secs(20)))?;
    conn.write_all(b"GET /hello HTTP/1.1\r\nHost: web\r\nConnection: close\r\n\r\n")?;
    let mut reply = String::new();
    let _ = conn.read_to_string(&mut reply);
    Ok(reply)
}
