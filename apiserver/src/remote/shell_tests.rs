use std::collections::BTreeMap;

use bytes::Bytes;
use tokio::sync::mpsc;

use super::*;
use crate::remote::stdio::Stdin;

fn container() -> Container {
    let mut files = BTreeMap::new();
    files.insert(
        "/etc/config/greeting".to_string(),
        Bytes::from_static(b"hello"),
    );
    files.insert("/etc/config/sub/x".to_string(), Bytes::from_static(b"x"));
    Container {
        hostname: "web-0".into(),
        ip: "10.1.0.5".into(),
        env: vec![
            ("PATH".into(), "/bin".into()),
            ("HOSTNAME".into(), "web-0".into()),
            ("MODE".into(), "test".into()),
        ],
        files,
    }
}

/// What one exec printed on stdout and stderr, and how it ended.
struct Ran {
    outcome: Outcome,
    stdout: String,
    stderr: String,
}

async fn run_with(argv: &[&str], stdin: Option<&[&str]>, tty: bool) -> Ran {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let stdin = match stdin {
        Some(chunks) => {
            let (stdin, writer) = Stdin::channel();
            for c in chunks {
                assert!(writer.send(Bytes::copy_from_slice(c.as_bytes())));
            }
            stdin
        }
        None => Stdin::closed(),
    };
    let mut stdio = Stdio::new(stdin, tx, tty, true, true);
    let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
    let outcome = exec(&argv, &container(), &mut stdio).await;
    drop(stdio);
    let (mut stdout, mut stderr) = (String::new(), String::new());
    while let Some((channel, data)) = rx.recv().await {
        let text = String::from_utf8_lossy(&data);
        match channel {
            STDOUT => stdout.push_str(&text),
            _ => stderr.push_str(&text),
        }
    }
    Ran {
        outcome,
        stdout,
        stderr,
    }
}

async fn run(argv: &[&str]) -> Ran {
    run_with(argv, None, false).await
}

async fn sh(script: &str) -> Ran {
    run(&["sh", "-c", script]).await
}

#[tokio::test]
async fn exit_codes_and_lists() {
    let r = sh("echo hi; exit 3").await;
    assert_eq!((r.stdout.as_str(), r.outcome), ("hi\n", Outcome::Exited(3)));
    let r = sh("false && echo no || echo yes; true").await;
    assert_eq!(
        (r.stdout.as_str(), r.outcome),
        ("yes\n", Outcome::Exited(0))
    );
    let r = sh("false; echo $?; exit 300").await;
    assert_eq!((r.stdout.as_str(), r.outcome), ("1\n", Outcome::Exited(44)));
    assert_eq!(run(&["/bin/false"]).await.outcome, Outcome::Exited(1));
    let r = sh("exit x").await;
    assert_eq!(r.outcome, Outcome::Exited(2));
    assert_eq!(r.stderr, "sh: exit: Illegal number: x\n");
}

#[tokio::test]
async fn unknown_programs_fail_as_the_runtime_and_the_shell_say() {
    let r = run(&["foo"]).await;
    let Outcome::Failed(why) = r.outcome else {
        panic!("expected a runtime failure, got {:?}", r.outcome);
    };
    assert!(why.starts_with("error executing command in container: failed to exec in container: failed to start exec \""), "{why}");
    assert!(
        why.ends_with("exec: \"foo\": executable file not found in $PATH: unknown"),
        "{why}"
    );
    let Outcome::Failed(why) = run(&["/opt/app"]).await.outcome else {
        panic!("expected a runtime failure");
    };
    assert!(why.contains("exec: \"/opt/app\": stat /opt/app: no such file or directory"));
    let r = sh("foo bar; echo after").await;
    assert_eq!(r.stderr, "sh: foo: not found\n");
    assert_eq!(
        (r.stdout.as_str(), r.outcome),
        ("after\n", Outcome::Exited(0))
    );
    assert_eq!(sh("foo").await.outcome, Outcome::Exited(127));
}

#[tokio::test]
async fn environment_and_variables() {
    let r = sh("echo $MODE ${HOSTNAME} \"$NOPE\"; A=1; export B=2; echo $A$B").await;
    assert_eq!(r.stdout, "test web-0 \n12\n");
    let r = run(&["env"]).await;
    assert_eq!(r.stdout, "PATH=/bin\nHOSTNAME=web-0\nMODE=test\n");
    let r = sh("export X=y; env").await;
    assert!(r.stdout.ends_with("X=y\n"), "{}", r.stdout);
    let r = run(&["printenv", "MODE", "NOPE"]).await;
    assert_eq!(
        (r.stdout.as_str(), r.outcome),
        ("test\n", Outcome::Exited(1))
    );
    assert_eq!(run(&["hostname"]).await.stdout, "web-0\n");
    assert_eq!(run(&["hostname", "-i"]).await.stdout, "10.1.0.5\n");
}

#[tokio::test]
async fn files_from_volumes() {
    let r = run(&["cat", "/etc/config/greeting"]).await;
    assert_eq!(
        (r.stdout.as_str(), r.outcome),
        ("hello", Outcome::Exited(0))
    );
    let r = run(&["cat", "/etc/config/nope"]).await;
    assert_eq!(
        r.stderr,
        "cat: can't open '/etc/config/nope': No such file or directory\n"
    );
    assert_eq!(r.outcome, Outcome::Exited(1));
    let r = run(&["cat", "/etc/config"]).await;
    assert_eq!(r.stderr, "cat: read error: Is a directory\n");
    assert_eq!(run(&["ls", "/etc/config/"]).await.stdout, "greeting\nsub\n");
    let r = run(&["ls", "/nope"]).await;
    assert_eq!(
        (r.stderr.as_str(), r.outcome),
        ("ls: /nope: No such file or directory\n", Outcome::Exited(1))
    );
    assert!(run(&["ls"]).await.stdout.contains("etc\n"));
    let r = sh("cat < /etc/config/greeting; cat /nope 2>/dev/null || echo missing").await;
    assert_eq!(r.stdout, "hellomissing\n");
    let r = sh("echo x > /tmp/f").await;
    assert_eq!(r.stderr, "sh: can't create /tmp/f: Read-only file system\n");
}

#[tokio::test]
async fn redirections_and_pipes() {
    let r = sh("echo err >&2; echo out").await;
    assert_eq!((r.stdout.as_str(), r.stderr.as_str()), ("out\n", "err\n"));
    let r = sh("cat /nope 2>&1").await;
    assert!(r.stdout.starts_with("cat: can't open"), "{}", r.stdout);
    let r = sh("echo piped | cat | cat").await;
    assert_eq!(r.stdout, "piped\n");
    let r = sh("echo -n a; echo -e 'b\\tc'").await;
    assert_eq!(r.stdout, "ab\tc\n");
    let r = sh("echo 'unterminated").await;
    assert_eq!(r.outcome, Outcome::Exited(2));
    assert_eq!(r.stderr, "sh: syntax error: unterminated quoted string\n");
}

#[tokio::test]
async fn stdin_is_read_by_cat_and_by_a_shell() {
    let r = run_with(&["cat"], Some(&["one\n", "two"]), false).await;
    assert_eq!(r.stdout, "one\ntwo");
    let r = run_with(&["sh"], Some(&["echo a; ", "exit 4\necho never\n"]), false).await;
    assert_eq!((r.stdout.as_str(), r.outcome), ("a\n", Outcome::Exited(4)));
    // No stdin: cat sees EOF at once.
    assert_eq!(run(&["cat"]).await.outcome, Outcome::Exited(0));
}

#[tokio::test]
async fn a_terminal_prompts_echoes_and_ends_lines_with_crlf() {
    let r = run_with(&["sh"], Some(&["echo hi\r", "exit\r"]), true).await;
    assert_eq!(r.stdout, "/ # echo hi\r\nhi\r\n/ # exit\r\n");
    assert!(r.stderr.is_empty());
}

#[tokio::test(start_paused = true)]
async fn sleep_waits_and_date_prints_the_time() {
    let started = tokio::time::Instant::now();
    let r = sh("sleep 1.5; sleep 1m").await;
    assert_eq!(r.outcome, Outcome::Exited(0));
    assert_eq!(started.elapsed(), std::time::Duration::from_millis(61_500));
    let r = sh("sleep x").await;
    assert_eq!(
        (r.stderr.as_str(), r.outcome),
        ("sleep: invalid number 'x'\n", Outcome::Exited(1))
    );
    let r = run(&["date", "+%Y"]).await;
    assert_eq!(r.stdout.trim().len(), 4);
    let r = run(&["date"]).await;
    assert!(r.stdout.contains(" UTC "), "{}", r.stdout);
    assert_eq!(run(&["date", "+%Q"]).await.outcome, Outcome::Exited(1));
}

#[test]
fn paths_are_normalized() {
    assert_eq!(
        normalize("/etc//config/./x/../greeting/"),
        "/etc/config/greeting"
    );
    assert_eq!(normalize("etc"), "/etc");
    assert_eq!(normalize("/.."), "/");
    let c = container();
    assert!(c.is_dir("/etc/config/sub"));
    assert!(!c.is_dir("/etc/conf"));
    assert_eq!(
        c.file("/etc/config/../config/greeting"),
        Ok(Bytes::from_static(b"hello"))
    );
}
