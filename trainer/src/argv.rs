//! Typed arguments back to a command line. The sweep's worker processes (`--devices`) are
//! started with the arguments of their coordinator, so `to_argv` must say exactly what clap
//! parses: `tests::every_subcommand_round_trips` builds every subcommand's arguments, renders
//! them and parses them back.

use std::fmt::Display;
use std::path::Path;

/// A command line under construction: `vnni-dispatch <subcommand> --flag value ...`.
pub struct Argv(Vec<String>);

impl Argv {
    pub fn new(subcommand: &str) -> Argv {
        Argv(vec![subcommand.to_string()])
    }

    /// `--name` when `on`.
    pub fn flag(mut self, name: &str, on: bool) -> Argv {
        if on {
            self.0.push(format!("--{name}"));
        }
        self
    }

    pub fn val(mut self, name: &str, v: impl Display) -> Argv {
        self.0.push(format!("--{name}"));
        self.0.push(v.to_string());
        self
    }

    pub fn path(self, name: &str, p: &Path) -> Argv {
        self.val(name, p.display())
    }

    pub fn opt(self, name: &str, v: Option<impl Display>) -> Argv {
        match v {
            Some(v) => self.val(name, v),
            None => self,
        }
    }

    pub fn opt_path(self, name: &str, p: Option<&Path>) -> Argv {
        self.opt(name, p.map(|p| p.display()))
    }

    /// `--name a,b,c`, or nothing for an empty list.
    pub fn list<T: Display>(self, name: &str, v: &[T]) -> Argv {
        if v.is_empty() {
            return self;
        }
        let joined = v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(",");
        self.val(name, joined)
    }

    /// The flags of a group of arguments (`#[command(flatten)]`), rendered by `render`.
    pub fn then(self, render: impl FnOnce(Argv) -> Argv) -> Argv {
        render(self)
    }

    /// A positional argument.
    pub fn pos(mut self, v: impl Display) -> Argv {
        self.0.push(v.to_string());
        self
    }

    pub fn done(self) -> Vec<String> {
        self.0
    }
}

/// Arguments that render themselves as the command line that parses back to them.
pub trait ToArgv {
    fn to_argv(&self) -> Vec<String>;
}
