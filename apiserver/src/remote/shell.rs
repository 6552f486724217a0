//! What an emulated container runs for `exec`: a small, fixed set of programs and a shell, over
//! the container's environment and the files its volumes mount. Nothing runs on the host.
//!
//! Programs (by name or as `/bin/NAME`, `/usr/bin/NAME`, …): `sh` (also `bash`, `ash`, `dash`:
//! `-c SCRIPT`, or commands read line by line from stdin), `echo` (`-n`, `-e`), `cat` (files,
//! or stdin), `env`, `printenv`, `hostname` (`-i` for the pod IP), `date` (`+FORMAT`, `-u`),
//! `sleep`, `ls`, `pwd`, `true`, `false`. The shell adds `exit`, `export`, `unset`, `cd`, `:`,
//! `NAME=value` and [`script`](super::script)'s syntax. Anything else is an executable the
//! image does not have: the runtime fails the exec as containerd does, and inside a shell the
//! shell prints `sh: NAME: not found` and sets status 127, as busybox does.

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use chrono::format::{Item, StrftimeItems};
use chrono::Utc;

use super::channel::{Outcome, STDERR, STDOUT};
use super::container::Container;
use super::script::{self, Link, Piece, Simple, Target, Word};
use super::stdio::Stdio;

/// The programs an emulated image has.
const PROGRAMS: &[&str] = &[
    "sh", "bash", "ash", "dash", "echo", "cat", "env", "printenv", "hostname", "date", "sleep",
    "ls", "pwd", "true", "false",
];

/// Directories every emulated image has, besides those its volumes mount.
const IMAGE_DIRS: &[&str] = &[
    "/bin", "/dev", "/etc", "/home", "/proc", "/root", "/sys", "/tmp", "/usr", "/var",
];

/// Runs `argv` in the container. Its stdin, stdout and stderr are `stdio`'s.
pub async fn exec(argv: &[String], container: &Container, stdio: &mut Stdio) -> Outcome {
    let Some(program) = argv.first() else {
        return Outcome::Failed(runtime_error("exec: no command"));
    };
    let Some(name) = program_name(program) else {
        let why = if program.contains('/') {
            format!("exec: \"{program}\": stat {program}: no such file or directory")
        } else {
            format!("exec: \"{program}\": executable file not found in $PATH")
        };
        return Outcome::Failed(runtime_error(&why));
    };
    let mut shell = Shell::new(container);
    let mut io = Io::new(stdio);
    Outcome::Exited(shell.program(name, &argv[1..], &mut io).await & 0xff)
}

/// containerd's words for an exec it could not start, as the streaming server reports them.
fn runtime_error(why: &str) -> String {
    let id = format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    format!(
        "error executing command in container: failed to exec in container: failed to start exec \"{id}\": OCI runtime exec failed: exec failed: unable to start container process: {why}: unknown"
    )
}

/// The program `path` names, if the image has it.
fn program_name(path: &str) -> Option<&'static str> {
    let (dir, base) = match path.rsplit_once('/') {
        Some((dir, base)) => (Some(dir), base),
        None => (None, path),
    };
    if dir.is_some_and(|d| {
        !matches!(
            d,
            "/bin" | "/usr/bin" | "/sbin" | "/usr/sbin" | "/usr/local/bin"
        )
    }) {
        return None;
    }
    PROGRAMS.iter().copied().find(|p| *p == base)
}

/// Where one command's output descriptor goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sink {
    Stdout,
    Stderr,
    Null,
    /// Into the pipe to the next command.
    Pipe,
}

/// One command's view of the streams: its redirections, a pipe's input and output.
struct Io<'s> {
    stdio: &'s mut Stdio,
    out: Sink,
    err: Sink,
    /// Stdin from a pipe or a `<` file instead of the session's.
    input: Option<Bytes>,
    piped: Vec<u8>,
}

impl<'s> Io<'s> {
    fn new(stdio: &'s mut Stdio) -> Io<'s> {
        Io {
            stdio,
            out: Sink::Stdout,
            err: Sink::Stderr,
            input: None,
            piped: Vec::new(),
        }
    }

    fn write(&mut self, fd: u8, data: &[u8]) {
        let sink = if fd == 2 { self.err } else { self.out };
        match sink {
            Sink::Stdout => self.stdio.emit(STDOUT, data),
            Sink::Stderr => self.stdio.emit(STDERR, data),
            Sink::Pipe => self.piped.extend_from_slice(data),
            Sink::Null => {}
        }
    }

    fn print(&mut self, text: &str) {
        self.write(1, text.as_bytes());
    }

    fn error(&mut self, text: &str) {
        self.write(2, format!("{text}\n").as_bytes());
    }

    /// The next bytes of stdin; `None` at EOF.
    async fn read(&mut self) -> Option<Bytes> {
        match &mut self.input {
            Some(input) if input.is_empty() => None,
            Some(input) => Some(std::mem::take(input)),
            None => self.stdio.stdin.chunk().await,
        }
    }
}

type Boxed<'a> = Pin<Box<dyn Future<Output = i32> + Send + 'a>>;

/// The shell's state: its variables and the last status.
struct Shell<'c> {
    container: &'c Container,
    /// Variables in the order they were set; `true` when exported.
    vars: Vec<(String, String, bool)>,
    status: i32,
    /// Set by `exit`.
    exited: Option<i32>,
}

impl<'c> Shell<'c> {
    fn new(container: &'c Container) -> Shell<'c> {
        Shell {
            container,
            vars: container
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.clone(), true))
                .collect(),
            status: 0,
            exited: None,
        }
    }

    fn var(&self, name: &str) -> Option<&str> {
        self.vars
            .iter()
            .find(|(k, _, _)| k == name)
            .map(|(_, v, _)| v.as_str())
    }

    fn set(&mut self, name: &str, value: Option<String>, export: bool) {
        match self.vars.iter_mut().find(|(k, _, _)| k == name) {
            Some(entry) => {
                if let Some(v) = value {
                    entry.1 = v;
                }
                entry.2 |= export;
            }
            None => self
                .vars
                .push((name.to_string(), value.unwrap_or_default(), export)),
        }
    }

    fn environment(&self) -> String {
        self.vars
            .iter()
            .filter(|(_, _, exported)| *exported)
            .map(|(k, v, _)| format!("{k}={v}\n"))
            .collect()
    }

    fn expand(&self, word: &Word) -> String {
        word.pieces
            .iter()
            .map(|p| match p {
                Piece::Text(t) => t.clone(),
                Piece::Param(name) if name == "?" => self.status.to_string(),
                Piece::Param(name) => self.var(name).unwrap_or_default().to_string(),
            })
            .collect()
    }

    /// Runs a script; its status.
    fn script<'a>(&'a mut self, text: &'a str, io: &'a mut Io<'_>) -> Boxed<'a>
    where
        'c: 'a,
    {
        Box::pin(async move {
            let parsed = match script::parse(text) {
                Ok(p) => p,
                Err(e) => {
                    io.error(&format!("sh: {e}"));
                    return 2;
                }
            };
            for (link, pipeline) in parsed {
                let skip = match link {
                    Link::Then => false,
                    Link::And => self.status != 0,
                    Link::Or => self.status == 0,
                };
                if skip {
                    continue;
                }
                self.status = self.pipeline(&pipeline, io).await;
                if let Some(code) = self.exited {
                    return code;
                }
            }
            self.status
        })
    }

    /// Runs the commands of a pipeline one after another, each one's output the next one's
    /// input; the last one's status.
    async fn pipeline(&mut self, pipeline: &[Simple], io: &mut Io<'_>) -> i32 {
        let mut input = io.input.take();
        let mut status = 0;
        for (i, simple) in pipeline.iter().enumerate() {
            let last = i + 1 == pipeline.len();
            let mut stage = Io {
                stdio: &mut *io.stdio,
                out: if last { io.out } else { Sink::Pipe },
                err: io.err,
                input: input.take(),
                piped: Vec::new(),
            };
            status = self.simple(simple, &mut stage).await;
            if !last {
                input = Some(Bytes::from(std::mem::take(&mut stage.piped)));
            } else if io.out == Sink::Pipe {
                io.piped.append(&mut stage.piped);
            }
            if self.exited.is_some() {
                break;
            }
        }
        status
    }

    async fn simple(&mut self, simple: &Simple, io: &mut Io<'_>) -> i32 {
        let mut words: Vec<String> = Vec::new();
        let mut assignments: Vec<(String, String)> = Vec::new();
        for word in &simple.words {
            let value = self.expand(word);
            let assignment = (!word.quoted
                || matches!(word.pieces.first(), Some(Piece::Text(t)) if t.contains('=')))
            .then(|| value.split_once('='))
            .flatten()
            .filter(|(name, _)| is_name(name));
            match assignment {
                Some((name, v)) if words.is_empty() => {
                    assignments.push((name.to_string(), v.to_string()))
                }
                _ => words.push(value),
            }
        }
        let mut redirected = Io {
            stdio: &mut *io.stdio,
            out: io.out,
            err: io.err,
            input: io.input.take(),
            piped: Vec::new(),
        };
        for r in &simple.redirects {
            let sink = match &r.target {
                Target::Fd(2) => redirected.err,
                Target::Fd(_) => redirected.out,
                Target::File(w) => {
                    let path = self.expand(w);
                    if r.fd == 0 {
                        match self.container.file(&path) {
                            Ok(data) => {
                                redirected.input = Some(data);
                                continue;
                            }
                            Err(e) => {
                                redirected.error(&format!("sh: can't open '{path}': {e}"));
                                return 1;
                            }
                        }
                    }
                    if path == "/dev/null" {
                        Sink::Null
                    } else {
                        redirected
                            .error(&format!("sh: can't create {path}: Read-only file system"));
                        return 1;
                    }
                }
            };
            match r.fd {
                2 => redirected.err = sink,
                1 => redirected.out = sink,
                _ => {}
            }
        }
        let status = if words.is_empty() {
            for (name, value) in assignments {
                self.set(&name, Some(value), false);
            }
            0
        } else {
            // `NAME=value command`: the variables hold for that command only.
            let saved = (!assignments.is_empty()).then(|| self.vars.clone());
            for (name, value) in assignments {
                self.set(&name, Some(value), true);
            }
            let status = self.command(&words, &mut redirected).await;
            if let Some(saved) = saved {
                self.vars = saved;
            }
            status
        };
        io.piped.append(&mut redirected.piped);
        status
    }

    /// A shell builtin, or a program.
    async fn command(&mut self, words: &[String], io: &mut Io<'_>) -> i32 {
        let (name, args) = match words.split_first() {
            Some(split) => split,
            None => return 0,
        };
        match name.as_str() {
            "exit" => {
                let code = match args.first().map(|a| a.parse::<i64>()) {
                    None => self.status,
                    Some(Ok(n)) => (n & 0xff) as i32,
                    Some(Err(_)) => {
                        io.error(&format!("sh: exit: Illegal number: {}", args[0]));
                        2
                    }
                };
                self.exited = Some(code);
                code
            }
            "export" | "unset" => {
                for a in args {
                    let (key, value) = match a.split_once('=') {
                        Some((k, v)) => (k, Some(v.to_string())),
                        None => (a.as_str(), None),
                    };
                    if name == "unset" {
                        self.vars.retain(|(k, _, _)| k != key);
                    } else {
                        self.set(key, value, true);
                    }
                }
                0
            }
            ":" => 0,
            "cd" => {
                let dir = args.first().map(String::as_str).unwrap_or("/");
                if self.container.is_dir(dir) {
                    0
                } else {
                    io.error(&format!(
                        "sh: cd: can't cd to {dir}: No such file or directory"
                    ));
                    2
                }
            }
            "if" | "then" | "else" | "fi" | "while" | "until" | "for" | "do" | "done" | "case"
            | "esac" | "function" | "{" | "}" => {
                io.error(&format!(
                    "sh: {name}: compound commands are not supported by the emulated shell"
                ));
                2
            }
            _ => match program_name(name) {
                Some(program) => self.program(program, args, io).await,
                None => {
                    io.error(&format!("sh: {name}: not found"));
                    127
                }
            },
        }
    }

    /// One of the image's programs.
    fn program<'a>(
        &'a mut self,
        name: &'static str,
        args: &'a [String],
        io: &'a mut Io<'_>,
    ) -> Boxed<'a>
    where
        'c: 'a,
    {
        Box::pin(async move {
            match name {
                "sh" | "bash" | "ash" | "dash" => self.sh(args, io).await,
                "echo" => {
                    echo(args, io);
                    0
                }
                "cat" => self.cat(args, io).await,
                "env" | "printenv" if args.is_empty() => {
                    let all = self.environment();
                    io.print(&all);
                    0
                }
                "env" => {
                    io.error("env: running programs under env is not supported");
                    125
                }
                "printenv" => {
                    let mut status = 0;
                    for a in args {
                        match self.var(a).map(str::to_string) {
                            Some(v) => io.print(&format!("{v}\n")),
                            None => status = 1,
                        }
                    }
                    status
                }
                "hostname" => {
                    let text = match args.first().map(String::as_str) {
                        Some("-i") => &self.container.ip,
                        _ => &self.container.hostname,
                    };
                    io.print(&format!("{text}\n"));
                    0
                }
                "date" => date(args, io),
                "sleep" => sleep(args, io).await,
                "ls" => self.ls(args, io),
                "pwd" => {
                    io.print("/\n");
                    0
                }
                "true" => 0,
                _ => 1,
            }
        })
    }

    /// `sh -c SCRIPT`, or commands from stdin a line at a time (with a prompt on a terminal).
    async fn sh(&mut self, args: &[String], io: &mut Io<'_>) -> i32 {
        let mut sub = Shell {
            container: self.container,
            vars: self.vars.clone(),
            status: 0,
            exited: None,
        };
        if let Some(pos) = args.iter().position(|a| a == "-c") {
            return match args.get(pos + 1) {
                Some(text) => sub.script(text, io).await,
                None => {
                    io.error("sh: -c requires an argument");
                    2
                }
            };
        }
        let tty = io.stdio.tty && io.input.is_none();
        loop {
            if tty {
                io.print("/ # ");
            }
            let line = match &mut io.input {
                Some(input) => {
                    let text = std::mem::take(input);
                    let mut lines = text.splitn(2, |b| *b == b'\n');
                    let first = lines.next().map(<[u8]>::to_vec);
                    *input = lines.next().map(Bytes::copy_from_slice).unwrap_or_default();
                    first.filter(|l| !l.is_empty() || !input.is_empty())
                }
                None => io.stdio.stdin.line(tty).await,
            };
            let Some(line) = line else {
                return sub.status;
            };
            if tty {
                // A terminal echoes what is typed.
                let mut echoed = line.clone();
                echoed.push(b'\n');
                io.write(1, &echoed);
            }
            let text = String::from_utf8_lossy(&line).into_owned();
            let status = sub.script(&text, io).await;
            if sub.exited.is_some() {
                return status;
            }
        }
    }

    async fn cat(&mut self, args: &[String], io: &mut Io<'_>) -> i32 {
        let files: Vec<&String> = args
            .iter()
            .filter(|a| !a.starts_with('-') || *a == "-")
            .collect();
        if files.is_empty() || files.iter().all(|f| *f == "-") {
            while let Some(chunk) = io.read().await {
                io.write(1, &chunk);
            }
            return 0;
        }
        let mut status = 0;
        for path in files {
            match self.container.file(path) {
                Ok(data) => io.write(1, &data),
                Err(FileError::IsADirectory) => {
                    io.error("cat: read error: Is a directory");
                    status = 1;
                }
                Err(e) => {
                    io.error(&format!("cat: can't open '{path}': {e}"));
                    status = 1;
                }
            }
        }
        status
    }

    fn ls(&mut self, args: &[String], io: &mut Io<'_>) -> i32 {
        let dirs: Vec<&str> = args
            .iter()
            .filter(|a| !a.starts_with('-'))
            .map(String::as_str)
            .collect();
        let dirs = if dirs.is_empty() { vec!["/"] } else { dirs };
        let many = dirs.len() > 1;
        let mut status = 0;
        for (i, dir) in dirs.iter().enumerate() {
            if self.container.file(dir).is_ok() {
                io.print(&format!("{dir}\n"));
                continue;
            }
            if !self.container.is_dir(dir) {
                io.error(&format!("ls: {dir}: No such file or directory"));
                status = 1;
                continue;
            }
            if many {
                let gap = if i > 0 { "\n" } else { "" };
                io.print(&format!("{gap}{dir}:\n"));
            }
            let listing: String = self
                .container
                .entries(dir)
                .into_iter()
                .map(|e| format!("{e}\n"))
                .collect();
            io.print(&listing);
        }
        status
    }
}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Why a path cannot be read.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum FileError {
    #[error("No such file or directory")]
    NotFound,
    #[error("Is a directory")]
    IsADirectory,
}

impl Container {
    /// The contents of the file at `path`.
    pub fn file(&self, path: &str) -> Result<Bytes, FileError> {
        let path = normalize(path);
        if let Some(data) = self.files.get(&path) {
            return Ok(data.clone());
        }
        if self.is_dir(&path) {
            Err(FileError::IsADirectory)
        } else {
            Err(FileError::NotFound)
        }
    }

    /// Whether `path` is a directory: one of the image's, or one a file lies under.
    pub fn is_dir(&self, path: &str) -> bool {
        let path = normalize(path);
        if path == "/" || IMAGE_DIRS.contains(&path.as_str()) {
            return true;
        }
        let prefix = format!("{path}/");
        self.files
            .range(prefix.clone()..)
            .next()
            .is_some_and(|(k, _)| k.starts_with(&prefix))
    }

    /// The names directly under a directory, sorted.
    pub fn entries(&self, dir: &str) -> Vec<String> {
        let dir = normalize(dir);
        let prefix = if dir == "/" {
            "/".to_string()
        } else {
            format!("{dir}/")
        };
        let mut names: Vec<String> = self
            .files
            .keys()
            .filter_map(|k| k.strip_prefix(&prefix))
            .filter_map(|rest| rest.split('/').next())
            .map(str::to_string)
            .collect();
        if dir == "/" {
            names.extend(IMAGE_DIRS.iter().map(|d| d[1..].to_string()));
        }
        for d in IMAGE_DIRS {
            if let Some(child) = d.strip_prefix(&prefix).filter(|c| !c.contains('/')) {
                names.push(child.to_string());
            }
        }
        names.sort();
        names.dedup();
        names
    }
}

/// An absolute path without `.`, `..`, doubled or trailing slashes (relative ones are from `/`).
fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

fn echo(args: &[String], io: &mut Io<'_>) {
    let mut newline = true;
    let mut escapes = false;
    let mut rest = args;
    while let Some((first, tail)) = rest.split_first() {
        let flags = first
            .strip_prefix('-')
            .filter(|f| !f.is_empty() && f.chars().all(|c| matches!(c, 'n' | 'e' | 'E')));
        let Some(flags) = flags else { break };
        for c in flags.chars() {
            match c {
                'n' => newline = false,
                'e' => escapes = true,
                _ => escapes = false,
            }
        }
        rest = tail;
    }
    let mut text = rest.join(" ");
    if escapes {
        text = unescape(&text);
    }
    if newline {
        text.push('\n');
    }
    io.print(&text);
}

fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('\\') => out.push('\\'),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// `date` and `date +FORMAT` (strftime), in UTC as the container's clock is.
fn date(args: &[String], io: &mut Io<'_>) -> i32 {
    let format = args
        .iter()
        .find_map(|a| a.strip_prefix('+'))
        .unwrap_or("%a %b %e %H:%M:%S UTC %Y");
    if let Some(bad) = args.iter().find(|a| !a.starts_with('+') && *a != "-u") {
        io.error(&format!("date: invalid date '{bad}'"));
        return 1;
    }
    let items: Vec<Item<'_>> = StrftimeItems::new(format).collect();
    if items.iter().any(|i| matches!(i, Item::Error)) {
        io.error(&format!("date: invalid format '{format}'"));
        return 1;
    }
    let text = format!("{}\n", Utc::now().format_with_items(items.into_iter()));
    io.print(&text);
    0
}

/// `sleep N[smhd]…`: the sum of its arguments.
async fn sleep(args: &[String], io: &mut Io<'_>) -> i32 {
    if args.is_empty() {
        io.error("sleep: missing operand");
        return 1;
    }
    let mut total = 0f64;
    for a in args {
        let (number, unit) = match a.char_indices().last() {
            Some((i, u @ ('s' | 'm' | 'h' | 'd'))) => (&a[..i], u),
            _ => (a.as_str(), 's'),
        };
        let scale = match unit {
            'm' => 60.0,
            'h' => 3600.0,
            'd' => 86400.0,
            _ => 1.0,
        };
        match number.parse::<f64>() {
            Ok(n) if n.is_finite() && n >= 0.0 => total += n * scale,
            _ => {
                io.error(&format!("sleep: invalid number '{a}'"));
                return 1;
            }
        }
    }
    let wait = std::time::Duration::try_from_secs_f64(total).unwrap_or(std::time::Duration::MAX);
    tokio::time::sleep(wait.min(std::time::Duration::from_secs(365 * 86400))).await;
    0
}

#[cfg(test)]
#[path = "shell_tests.rs"]
mod tests;
