//! [`Process`]: what an emulated container's main process does, read from its command and
//! args. `sleep N` exits 0 after N seconds, `exit N` and `false` fail, `sh -c "…"` runs a small
//! shell subset (`sleep`, `echo`, `exit`, `true`, `false`, `;`, `&&`, `||`, and
//! `while true; do …; done`), and anything else (an image's own entrypoint) runs until it is
//! stopped. What it `echo`es is its log. Pure: times are offsets from the process's start.

use std::time::Duration;

/// The most lines a looping process's log keeps (its oldest are dropped, as log rotation would).
const MAX_LOOP_LINES: u64 = 10_000;

/// The behaviour of one emulated process.
#[derive(Clone, Debug, PartialEq)]
pub struct Process {
    /// When it exits by itself and with which code; `None` runs until stopped.
    pub exit: Option<(Duration, i32)>,
    /// What it prints, and when.
    pub output: Output,
    /// Whether SIGTERM makes it exit. A shell or `sleep` as PID 1 has no handler and ignores
    /// it (the kubelet kills it when the grace period ends); a server's entrypoint exits.
    pub handles_sigterm: bool,
}

/// Lines printed at offsets from the process's start.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Output {
    pub lines: Vec<(Duration, String)>,
    /// `while true; do …; done`: from `start`, `body` repeats every `period` forever.
    pub repeat: Option<Repeat>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Repeat {
    pub start: Duration,
    pub period: Duration,
    pub body: Vec<(Duration, String)>,
}

impl Output {
    /// The lines printed within the first `elapsed` of the process's life.
    pub fn until(&self, elapsed: Duration) -> Vec<String> {
        let mut out: Vec<String> = self
            .lines
            .iter()
            .filter(|(at, _)| *at <= elapsed)
            .map(|(_, l)| l.clone())
            .collect();
        if let Some(r) = &self.repeat {
            if elapsed >= r.start && !r.body.is_empty() {
                let since = elapsed - r.start;
                let full = if r.period.is_zero() {
                    MAX_LOOP_LINES
                } else {
                    (since.as_nanos() / r.period.as_nanos()) as u64
                };
                let first = full.saturating_sub(MAX_LOOP_LINES / r.body.len() as u64);
                for round in first..=full {
                    let base = r.period * round as u32;
                    for (at, line) in &r.body {
                        if base + *at <= since {
                            out.push(line.clone());
                        }
                    }
                }
            }
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty() && self.repeat.is_none()
    }
}

impl Process {
    /// The process a container's `command` and `args` describe.
    pub fn from_command(command: &[String], args: &[String]) -> Process {
        let argv: Vec<&str> = command
            .iter()
            .chain(args.iter())
            .map(String::as_str)
            .collect();
        let Some(&program) = argv.first() else {
            return Process::server();
        };
        let base = program.rsplit('/').next().unwrap_or(program);
        if matches!(base, "sh" | "bash" | "ash" | "dash") {
            if let Some(pos) = argv.iter().position(|a| *a == "-c") {
                let script = argv.get(pos + 1).copied().unwrap_or("");
                return run_script(&tokenize(script));
            }
            // An interactive shell without a terminal exits at once.
            return Process::exits_with(Duration::ZERO, 0);
        }
        let words: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        if matches!(base, "sleep" | "echo" | "exit" | "true" | "false") {
            let mut words = words;
            words[0] = base.to_string();
            return run_script(&[Token::Word(words)]);
        }
        Process::server()
    }

    /// A container's main process: as [`Process::from_command`], except that a shell with no
    /// script and an open stdin (`stdin: true`) waits for input rather than exiting, until it
    /// is stopped (what it reads comes through attach, which the API server serves).
    pub fn for_container(command: &[String], args: &[String], stdin: bool) -> Process {
        let argv: Vec<&String> = command.iter().chain(args.iter()).collect();
        let shell = argv
            .first()
            .is_some_and(|p| matches!(p.rsplit('/').next(), Some("sh" | "bash" | "ash" | "dash")));
        if stdin && shell && !argv.iter().any(|a| *a == "-c") {
            return Process {
                exit: None,
                output: Output::default(),
                handles_sigterm: false,
            };
        }
        Process::from_command(command, args)
    }

    /// An image's own entrypoint: runs until stopped, exits on SIGTERM.
    pub fn server() -> Process {
        Process {
            exit: None,
            output: Output::default(),
            handles_sigterm: true,
        }
    }

    fn exits_with(after: Duration, code: i32) -> Process {
        Process {
            exit: Some((after, code)),
            output: Output::default(),
            handles_sigterm: false,
        }
    }

    /// Overrides the exit by a scripted crash.
    pub fn crash_after(mut self, after: Duration, code: i32) -> Process {
        if self.exit.is_none_or(|(at, _)| at > after) {
            self.exit = Some((after, code));
        }
        self
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Word(Vec<String>),
    Semi,
    And,
    Or,
}

/// Splits a shell script into simple commands and the operators between them.
fn tokenize(script: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = script.chars().peekable();
    let flush_word = |word: &mut String, in_word: &mut bool, words: &mut Vec<String>| {
        if *in_word {
            words.push(std::mem::take(word));
            *in_word = false;
        }
    };
    let flush_cmd = |words: &mut Vec<String>, tokens: &mut Vec<Token>| {
        if !words.is_empty() {
            tokens.push(Token::Word(std::mem::take(words)));
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == c {
                        break;
                    }
                    word.push(q);
                }
            }
            ' ' | '\t' => flush_word(&mut word, &mut in_word, &mut words),
            ';' | '\n' => {
                flush_word(&mut word, &mut in_word, &mut words);
                flush_cmd(&mut words, &mut tokens);
                tokens.push(Token::Semi);
            }
            '&' if chars.peek() == Some(&'&') => {
                chars.next();
                flush_word(&mut word, &mut in_word, &mut words);
                flush_cmd(&mut words, &mut tokens);
                tokens.push(Token::And);
            }
            '|' if chars.peek() == Some(&'|') => {
                chars.next();
                flush_word(&mut word, &mut in_word, &mut words);
                flush_cmd(&mut words, &mut tokens);
                tokens.push(Token::Or);
            }
            _ => {
                in_word = true;
                word.push(c);
            }
        }
    }
    flush_word(&mut word, &mut in_word, &mut words);
    flush_cmd(&mut words, &mut tokens);
    tokens
}

/// What running a list of simple commands does.
struct Run {
    now: Duration,
    status: i32,
    lines: Vec<(Duration, String)>,
    /// `Some` once the script exits (or `None` in `forever`).
    exited: bool,
    forever: bool,
}

fn run_script(tokens: &[Token]) -> Process {
    // `while true; do BODY; done` anywhere: what precedes runs once, the body forever.
    if let Some(start) = tokens
        .iter()
        .position(|t| matches!(t, Token::Word(w) if w.len() >= 2 && w[0] == "while" && (w[1] == "true" || w[1] == ":")))
    {
        let mut before = Run::new();
        before.exec_all(&tokens[..start]);
        if before.exited || before.forever {
            return before.into_process();
        }
        let rest = &tokens[start + 1..];
        let body_end = rest
            .iter()
            .position(|t| matches!(t, Token::Word(w) if w[0] == "done"))
            .unwrap_or(rest.len());
        // The body's first command follows `do`.
        let mut body: Vec<Token> = rest[..body_end].to_vec();
        if let Some(Token::Semi) = body.first() {
            body.remove(0);
        }
        if let Some(Token::Word(w)) = body.first_mut() {
            if w[0] == "do" {
                w.remove(0);
                if w.is_empty() {
                    body.remove(0);
                }
            }
        }
        let mut round = Run::new();
        round.exec_all(&body);
        if round.exited || round.forever {
            // A loop whose body exits (or never ends) runs once.
            let mut all = before;
            all.exec_all(&body);
            return all.into_process();
        }
        return Process {
            exit: None,
            output: Output {
                lines: before.lines,
                repeat: Some(Repeat {
                    start: before.now,
                    period: round.now,
                    body: round.lines,
                }),
            },
            handles_sigterm: false,
        };
    }
    let mut run = Run::new();
    run.exec_all(tokens);
    run.into_process()
}

impl Run {
    fn new() -> Run {
        Run {
            now: Duration::ZERO,
            status: 0,
            lines: Vec::new(),
            exited: false,
            forever: false,
        }
    }

    fn exec_all(&mut self, tokens: &[Token]) {
        let mut skip = false;
        for token in tokens {
            if self.exited || self.forever {
                return;
            }
            match token {
                Token::Semi => skip = false,
                Token::And => skip = self.status != 0,
                Token::Or => skip = self.status == 0,
                Token::Word(words) if !skip => self.exec(words),
                Token::Word(_) => {}
            }
        }
    }

    fn exec(&mut self, words: &[String]) {
        let args = &words[1..];
        match words[0].as_str() {
            "sleep" => match args.first().map(String::as_str) {
                Some("infinity") | Some("inf") => self.forever = true,
                Some(n) => match parse_seconds(n) {
                    Some(d) => {
                        self.now += d;
                        self.status = 0;
                    }
                    None => self.status = 1,
                },
                None => self.status = 1,
            },
            "echo" => {
                let newline_off = args.first().is_some_and(|a| a == "-n");
                let text = args[usize::from(newline_off)..].join(" ");
                self.lines.push((self.now, text));
                self.status = 0;
            }
            "exit" => {
                self.status = args
                    .first()
                    .and_then(|a| a.parse().ok())
                    .unwrap_or(self.status);
                self.exited = true;
            }
            "true" | ":" => self.status = 0,
            "false" => self.status = 1,
            // Anything else is a long-running program (a server started from a script).
            _ => self.forever = true,
        }
    }

    fn into_process(self) -> Process {
        Process {
            exit: (!self.forever).then_some((self.now, self.status)),
            output: Output {
                lines: self.lines,
                repeat: None,
            },
            handles_sigterm: false,
        }
    }
}

/// `10`, `2.5`, `3s`, `2m`, `1h`.
pub fn parse_seconds(text: &str) -> Option<Duration> {
    let (number, unit) = match text.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => (&text[..i], &text[i..]),
        None => (text, "s"),
    };
    let value: f64 = number.parse().ok()?;
    let scale = match unit {
        "ms" => 0.001,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return None,
    };
    let secs = value * scale;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(command: &[&str], args: &[&str]) -> Process {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        Process::from_command(&s(command), &s(args))
    }

    #[test]
    fn a_shell_with_stdin_waits_for_input() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let waiting = Process::for_container(&s(&["/bin/sh"]), &[], true);
        assert_eq!(waiting.exit, None);
        assert!(!waiting.handles_sigterm);
        assert_eq!(
            Process::for_container(&s(&["sh"]), &[], false).exit,
            Some((Duration::ZERO, 0))
        );
        let script = Process::for_container(&s(&["sh", "-c", "exit 2"]), &[], true);
        assert_eq!(script.exit, Some((Duration::ZERO, 2)));
    }

    #[test]
    fn plain_commands() {
        assert_eq!(
            p(&["sleep", "2"], &[]).exit,
            Some((Duration::from_secs(2), 0))
        );
        assert_eq!(p(&["/bin/false"], &[]).exit, Some((Duration::ZERO, 1)));
        assert_eq!(p(&["sleep"], &["infinity"]).exit, None);
        let server = p(&[], &[]);
        assert!(server.exit.is_none() && server.handles_sigterm);
        assert!(p(&["nginx", "-g", "daemon off;"], &[]).handles_sigterm);
        assert!(!p(&["sleep", "3600"], &[]).handles_sigterm);
    }

    #[test]
    fn shell_subset() {
        let proc = p(
            &["sh", "-c"],
            &["echo hello; sleep 1 && echo 'two words'; exit 3"],
        );
        assert_eq!(proc.exit, Some((Duration::from_secs(1), 3)));
        assert_eq!(
            proc.output.lines,
            vec![
                (Duration::ZERO, "hello".to_string()),
                (Duration::from_secs(1), "two words".to_string())
            ]
        );
        let failed = p(&["/bin/sh", "-c", "false && echo no; echo yes"], &[]);
        assert_eq!(failed.output.lines.len(), 1);
        assert_eq!(failed.exit, Some((Duration::ZERO, 0)));
        let exit1 = p(&["sh", "-c", "exit 1"], &[]);
        assert_eq!(exit1.exit, Some((Duration::ZERO, 1)));
        let or = p(&["sh", "-c", "false || exit 7"], &[]);
        assert_eq!(or.exit, Some((Duration::ZERO, 7)));
    }

    #[test]
    fn loops_repeat_their_output() {
        let proc = p(
            &[
                "sh",
                "-c",
                "echo start; while true; do echo tick; sleep 2; done",
            ],
            &[],
        );
        assert_eq!(proc.exit, None);
        assert_eq!(
            proc.output.until(Duration::from_secs(5)),
            vec!["start", "tick", "tick", "tick"]
        );
        assert_eq!(proc.output.until(Duration::ZERO), vec!["start", "tick"]);
    }

    #[test]
    fn durations() {
        assert_eq!(parse_seconds("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_seconds("0.5"), Some(Duration::from_millis(500)));
        assert_eq!(parse_seconds("x"), None);
    }
}
