//! "No floating point anywhere" as a check, not a hope: outside comments and string
//! literals, generated code may not name a floating type or write a floating literal.

use crate::error::{GenerateError, Result};

const FLOAT_WORDS: [&str; 5] = ["float", "double", "f32", "f64", "f16"];

/// The code of one line: string literals blanked, `//` comment dropped.
fn code_of(line: &str) -> String {
    let mut code = String::new();
    let mut chars = line.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        match (in_string, c) {
            (true, '\\') => {
                chars.next();
            }
            (true, '"') => {
                in_string = false;
                code.push('"');
            }
            (true, _) => {}
            (false, '"') => {
                in_string = true;
                code.push('"');
            }
            (false, '/') if chars.peek() == Some(&'/') => break,
            (false, _) => code.push(c),
        }
    }
    code
}

fn is_float_token(token: &str) -> bool {
    if FLOAT_WORDS.contains(&token) {
        return true;
    }
    // 1e9 style literals (the code has no hex literals for `e` to hide in).
    token.starts_with(|c: char| c.is_ascii_digit()) && !token.starts_with("0x") && token.contains(['e', 'E'])
}

/// Fail on the first line of `text` whose code uses floating point.
pub fn check(file: &str, text: &str) -> Result<()> {
    for (i, line) in text.lines().enumerate() {
        let code = code_of(line);
        let decimal_point =
            code.as_bytes().windows(3).any(|w| w[0].is_ascii_digit() && w[1] == b'.' && w[2].is_ascii_digit());
        let float_word = code.split(|c: char| !c.is_ascii_alphanumeric() && c != '_').any(is_float_token);
        if decimal_point || float_word {
            return Err(GenerateError::FloatingPoint { file: file.into(), line: i + 1, text: line.trim().into() });
        }
    }
    Ok(())
}
