//! The minijinja environment: the templates (compiled into the crate, so output depends on
//! nothing but the policy), whitespace rules and the escaping filters of each language.

use minijinja::{Environment, UndefinedBehavior};

/// (name, source) of every template, in a fixed order (it feeds the generator version).
pub const TEMPLATES: [(&str, &str); 6] = [
    ("provenance.jinja", include_str!("../templates/provenance.jinja")),
    ("types.h.jinja", include_str!("../templates/types.h.jinja")),
    ("tree.jinja", include_str!("../templates/tree.jinja")),
    ("dispatch.h.jinja", include_str!("../templates/dispatch.h.jinja")),
    ("dispatch.inc.jinja", include_str!("../templates/dispatch.inc.jinja")),
    ("dispatch.rs.jinja", include_str!("../templates/dispatch.rs.jinja")),
];

pub fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_syntax(
        minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .keep_trailing_newline(true)
            .build()
            .expect("the default delimiters are valid"),
    );
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
    env.add_filter("cpp_str", cpp_str);
    env.add_filter("rust_str", rust_str);
    env.add_filter("comment", comment);
    for (name, source) in TEMPLATES {
        env.add_template(name, source).expect("the bundled templates parse");
    }
    env
}

/// A C++ string literal. Octal escapes (always three digits) so a following character can
/// never extend an escape, as it can with `\x`.
pub fn cpp_str(s: &str) -> String {
    let mut out = String::from("\"");
    for b in s.bytes() {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            // `?` too: `??x` would be a trigraph before C++17.
            0x20..=0x7e if b != b'?' => out.push(b as char),
            _ => out.push_str(&format!("\\{b:03o}")),
        }
    }
    out.push('"');
    out
}

/// A Rust string literal (the Debug form escapes exactly what Rust requires).
pub fn rust_str(s: &str) -> String {
    format!("{s:?}")
}

/// Text safe inside a `//` comment of either language: printable ASCII only, and no
/// backslash (a trailing one would splice the next line into the comment).
pub fn comment(s: &str) -> String {
    s.chars().map(|c| if (' '..='~').contains(&c) && c != '\\' { c } else { '?' }).collect()
}
