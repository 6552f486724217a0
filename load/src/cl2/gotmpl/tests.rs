use std::path::Path;

use super::{Template, Value};

fn data(yaml: &str) -> Value {
    let json: serde_json::Value = serde_saphyr::from_str(yaml).unwrap();
    Value::from_json(&json)
}

fn render(source: &str, yaml: &str) -> Result<String, String> {
    Template::parse("t.yaml", source, Path::new("."))
        .and_then(|t| t.render(&data(yaml)))
        .map_err(|e| e.to_string())
}

fn ok(source: &str, yaml: &str) -> String {
    render(source, yaml).unwrap()
}

#[test]
fn text_fields_and_trimming() {
    assert_eq!(ok("a {{.X}} b", "X: 1"), "a 1 b");
    assert_eq!(ok("a  {{- .X -}}  \n b", "X: hi"), "ahib");
    assert_eq!(ok("{{.A.B.C}}", "A: {B: {C: deep}}"), "deep");
    assert_eq!(ok("{{/* a comment */}}x", "{}"), "x");
    assert_eq!(ok("{{-3}}", "{}"), "-3");
    assert_eq!(
        ok("{{ 1.5 }} {{ 2e6 }} {{ 0x1F }} {{ 'a' }}", "{}"),
        "1.5 2e+06 31 97"
    );
}

#[test]
fn missing_keys_are_nil_until_printed() {
    assert_eq!(ok("{{DefaultParam .X 3}}", "{}"), "3");
    assert_eq!(ok("{{DefaultParam .X 3}}", "X: 5"), "5");
    assert_eq!(ok("{{if .X}}set{{else}}unset{{end}}", "{}"), "unset");
    assert_eq!(ok("{{if eq .X nil}}nil{{end}}", "{}"), "nil");
    assert_eq!(ok("{{.A.B | DefaultParam 7}}", "{}"), "7");
    let e = render("line1\n{{.Nodes}}", "{}").unwrap_err();
    assert!(
        e.starts_with("t.yaml:2: parameter .Nodes is not set"),
        "{e}"
    );
    let e = render("\n\n{{MultiplyInt .PODS 2}}", "{}").unwrap_err();
    assert!(
        e.starts_with("t.yaml:3: error calling MultiplyInt: parameter .PODS is not set"),
        "{e}"
    );
}

#[test]
fn variables_pipelines_and_parentheses() {
    let src = "{{$n := DefaultParam .N 10}}{{$half := DivideInt $n 2}}{{$half}} {{$n | MultiplyInt 3}} {{(AddInt 1 2)}}";
    assert_eq!(ok(src, "{}"), "5 30 3");
    assert_eq!(ok("{{$x := 1}}{{$x = 2}}{{$x}}", "{}"), "2");
    assert_eq!(ok("{{$.A}}", "A: top"), "top");
    assert_eq!(ok("{{(index .M \"k\").V}}", "M: {k: {V: 9}}"), "9");
}

#[test]
fn control_structures() {
    assert_eq!(
        ok("{{range $i, $e := .L}}{{$i}}={{$e}};{{end}}", "L: [a, b]"),
        "0=a;1=b;"
    );
    assert_eq!(
        ok("{{range .L}}{{.}}{{else}}empty{{end}}", "L: []"),
        "empty"
    );
    assert_eq!(
        ok(
            "{{range $k, $v := .M}}{{$k}}{{$v}}{{end}}",
            "M: {b: 2, a: 1}"
        ),
        "a1b2"
    );
    assert_eq!(
        ok(
            "{{range Loop 5}}{{if eq . 3}}{{break}}{{end}}{{.}}{{end}}",
            "{}"
        ),
        "012"
    );
    assert_eq!(
        ok(
            "{{range Loop 4}}{{if eq . 1}}{{continue}}{{end}}{{.}}{{end}}",
            "{}"
        ),
        "023"
    );
    assert_eq!(ok("{{with .A}}{{.B}}{{else}}none{{end}}", "A: {B: x}"), "x");
    assert_eq!(
        ok(
            "{{if lt .N 1}}a{{else if lt .N 5}}b{{else}}c{{end}}",
            "N: 3"
        ),
        "b"
    );
    assert_eq!(
        ok(
            "{{define \"x\"}}<{{.}}>{{end}}{{template \"x\" .V}}",
            "V: 1"
        ),
        "<1>"
    );
    assert_eq!(ok("{{block \"b\" .V}}[{{.}}]{{end}}", "V: 2"), "[2]");
    assert_eq!(ok("{{range Seq 3}}{{.}}{{end}}", "{}"), "000");
}

#[test]
fn builtins() {
    assert_eq!(
        ok("{{and 1 0}} {{or 0 \"\" 5}} {{not true}}", "{}"),
        "0 5 false"
    );
    assert_eq!(
        ok(
            "{{len .L}} {{index .L 1}} {{slice \"hello\" 1 3}}",
            "L: [1, 2]"
        ),
        "2 2 el"
    );
    assert_eq!(
        ok(
            "{{printf \"%05d|%-4s|%.2f|%v|%q|%x\" 42 \"ab\" 3.14159 .L \"q\" 255}}",
            "L: [1, 2]"
        ),
        "00042|ab  |3.14|[1 2]|\"q\"|ff"
    );
    assert_eq!(
        ok("{{print 1 2 \"a\" \"b\"}}{{println \"x\"}}", "{}"),
        "1 2abx\n"
    );
    assert_eq!(
        ok(
            "{{eq 1 2 1}} {{ne \"a\" \"b\"}} {{ge 2 2.0}} {{gt 1.5 1}}",
            "{}"
        ),
        "true true true true"
    );
    // `and` stops at its first false argument: the division by zero is never made.
    assert_eq!(ok("{{and false (DivideInt 1 0)}}", "{}"), "false");
}

#[test]
fn cl2_functions() {
    assert_eq!(
        ok(
            "{{AddInt 1 2 3.7}} {{AddFloat 1 0.5}} {{SubtractInt 10 3}} {{SubtractFloat 1 0.25}}",
            "{}"
        ),
        "6 1.5 7 0.75"
    );
    assert_eq!(ok("{{MultiplyInt 2 \"3\" 1.5}} {{MultiplyFloat 2 1.5}} {{DivideInt 7 2}} {{DivideFloat 7 2}}", "{}"), "9 3 3 3.5");
    assert_eq!(
        ok(
            "{{MaxInt 1 9 3}} {{MinInt 4 2}} {{MaxFloat 1.5 0}} {{MinFloat 2 0.5}} {{Mod 7 3}}",
            "{}"
        ),
        "9 2 1.5 0.5 1"
    );
    assert_eq!(
        ok(
            "{{IfThenElse true 1 2}} {{IfThenElse (eq .M \"x\") \"y\" \"n\"}}",
            "M: x"
        ),
        "1 y"
    );
    assert_eq!(
        ok(
            "{{Ceil 1.2}} {{Lowercase \"AbC\"}} {{StringSplit \"a,b\"}}",
            "{}"
        ),
        "2 abc [a b]"
    );
    assert_eq!(ok("{{YamlQuote \"a: b\" 1}}", "{}"), "'a: b'\n  ");
    let r: i64 = ok("{{RandIntRange 5 7}}", "{}").parse().unwrap();
    assert!((5..=7).contains(&r));
    let r: i64 = ok("{{RandInt 3}}", "{}").parse().unwrap();
    assert!((0..=3).contains(&r));
    assert_eq!(ok("{{len (RandData 12)}}", "{}"), "12");
    // Seeded data: the same for the same seed, of the asked length, empty for 0.
    let a = ok("{{RandDataWithSeed 16 .Name}}", "Name: deployment-0");
    let b = ok("{{RandDataWithSeed 16 .Name}}", "Name: deployment-0");
    let c = ok("{{RandDataWithSeed 16 .Name}}", "Name: deployment-1");
    assert_eq!(a.len(), 16);
    assert!(a.chars().all(|ch| ch.is_ascii_alphanumeric()), "{a}");
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_eq!(ok("{{RandDataWithSeed 0 .Name}}", "Name: x"), "");
    assert_eq!(
        ok("{{Concat .R \"/pause:3.9\"}}", "R: registry.k8s.io"),
        "registry.k8s.io/pause:3.9"
    );
    assert_eq!(ok("{{Concat \"a\" \"b\" \"c\"}}{{Concat}}", "{}"), "abc");
    let e = render("{{Concat \"a\" 1}}", "{}").unwrap_err();
    assert!(e.contains("want: string"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("inc.txt"), "included").unwrap();
    let t = Template::parse("t", "{{IncludeEmbedFile \"inc.txt\"}}", dir.path()).unwrap();
    assert_eq!(
        t.render(&Value::Map(Default::default())).unwrap(),
        "included"
    );
}

#[test]
fn errors_name_file_and_line() {
    let e = render("a\nb\n{{Frobnicate 1}}", "{}").unwrap_err();
    assert_eq!(e, "t.yaml:3: function \"Frobnicate\" not defined");
    let e = render("{{if .X}}\nno end", "{}").unwrap_err();
    assert!(e.starts_with("t.yaml:1: unclosed if"), "{e}");
    let e = render("\n{{.X", "{}").unwrap_err();
    assert!(e.starts_with("t.yaml:2: unclosed action"), "{e}");
    let e = render("{{DivideInt 1 0}}", "{}").unwrap_err();
    assert!(e.contains("division by zero"), "{e}");
    let e = render("\n{{$y}}", "{}").unwrap_err();
    assert_eq!(e, "t.yaml:2: undefined variable: $y");
    let e = render("{{template \"nope\"}}", "{}").unwrap_err();
    assert!(e.contains("no such template"), "{e}");
    let e = render("x\n{{end}}", "{}").unwrap_err();
    assert_eq!(e, "t.yaml:2: unexpected {{end}}");
    let e = render("{{break}}", "{}").unwrap_err();
    assert!(e.contains("outside"), "{e}");
}

#[test]
fn unpacked_parameters() {
    assert_eq!(Value::unpack("12"), Value::Int(12));
    assert_eq!(Value::unpack("1.5"), Value::Float(1.5));
    assert_eq!(Value::unpack("true"), Value::Bool(true));
    assert_eq!(Value::unpack("abc"), Value::Str("abc".into()));
}
