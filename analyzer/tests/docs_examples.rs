//! The examples in docs/trace-format.md and docs/plan-format.md read with the real readers, and
//! every event name the reader knows is documented.

fn block(doc: &str, lang: &str) -> String {
    let text = std::fs::read_to_string(format!("{}/../docs/{doc}", env!("CARGO_MANIFEST_DIR")))
        .expect("doc exists");
    let start = text.find(&format!("```{lang}\n")).expect("example block") + lang.len() + 4;
    let end = start + text[start..].find("```").unwrap();
    text[start..end].to_string()
}

#[test]
fn trace_example_reads() {
    let t = echo_analyzer::trace::read_trace(block("trace-format.md", "json").as_bytes()).unwrap();
    assert_eq!(t.records.len(), 14);
    // Issue 47: every record has its host time, and the GPU time of the submission lies between
    // its submission and the host's observation of its completion.
    assert!(t.records.iter().all(|r| r.t.is_some()));
    let m = echo_analyzer::model::Model::build(&t);
    let tm = echo_analyzer::timing::Timing::build(&t, &m);
    assert!(tm.timed);
    let s = tm.submissions[&11];
    assert!(s.begin >= tm.at(11).unwrap() && s.end <= tm.at(12).unwrap());
    assert_eq!(tm.copies.len(), 1);
}

#[test]
fn plan_example_reads() {
    let p = echo_analyzer::plan::parse_plan(&block("plan-format.md", "json")).unwrap();
    assert_eq!(p.groups[0].members.len(), 2);
}

#[test]
fn every_event_is_documented() {
    let doc = std::fs::read_to_string(format!(
        "{}/../docs/trace-format.md",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let src =
        std::fs::read_to_string(format!("{}/src/trace.rs", env!("CARGO_MANIFEST_DIR"))).unwrap();
    // Variants of `enum Event`, in snake_case.
    let body = &src[src.find("pub enum Event {").unwrap()..];
    let body = &body[..body.find("\n}\n").unwrap()];
    let mut seen = 0;
    for line in body.lines() {
        let l = line.trim();
        let name: String = l.chars().take_while(|c| c.is_alphanumeric()).collect();
        if name.is_empty()
            || !name.chars().next().unwrap().is_uppercase()
            || !(l.ends_with('{') || l.ends_with(','))
        {
            continue;
        }
        let mut snake = String::new();
        for (i, c) in name.chars().enumerate() {
            if c.is_uppercase() && i > 0 {
                snake.push('_');
            }
            snake.push(c.to_ascii_lowercase());
        }
        assert!(
            doc.contains(&format!("`{snake}`")),
            "event {snake} is not in docs/trace-format.md"
        );
        seen += 1;
    }
    assert!(seen >= 28, "only {seen} events found in trace.rs");
}
