//! The one error enum of the core. Bad input is `Scenario` or `Trace` (the Python front
//! maps both to `ScenarioError` and exit code 2); `Interrupted` is a progress callback asking to stop;
//! `Internal` is a bug in the simulator, reported instead of a panic.
//!
//! Every message is one line: the field (as the scenario names it, e.g.
//! `scenario.workload[0].size`) or the file, the value, and what is allowed.

use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// A scenario field is invalid. `path` is the field's location, e.g.
    /// `scenario.cgroup[1].memory.max`; `msg` says what is wrong and what is allowed.
    Scenario {
        path: String,
        msg: String,
        hint: Option<String>,
    },
    /// A trace file is unreadable or malformed: `record` is the 1-based record (line,
    /// row or binary record) where reading stopped, 0 when the file could not be opened.
    Trace {
        file: String,
        record: u64,
        msg: String,
    },
    /// The progress callback asked the run to stop (Ctrl-C).
    Interrupted,
    /// A simulator invariant failed; this is a bug.
    Internal(String),
}

impl Error {
    pub fn scenario(path: impl Into<String>, msg: impl Into<String>) -> Self {
        Error::Scenario {
            path: path.into(),
            msg: msg.into(),
            hint: None,
        }
    }

    pub fn with_hint(self, h: impl Into<String>) -> Self {
        match self {
            Error::Scenario { path, msg, .. } => Error::Scenario {
                path,
                msg,
                hint: Some(h.into()),
            },
            e => e,
        }
    }
}

/// A value from the user's input in a message: quoted, and cut after 60 characters (a
/// message stays readable whatever the input holds).
pub fn quoted(s: &str) -> String {
    if s.chars().count() > 60 {
        let cut: String = s.chars().take(57).collect();
        format!("{cut:?}...")
    } else {
        format!("{s:?}")
    }
}

/// Text from the user's input in a message: control characters (a line break in a CSV
/// header, say) are escaped, so that a message stays one line.
struct OneLine<'a>(&'a str);

impl fmt::Display for OneLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            if c.is_control() {
                write!(f, "{}", c.escape_default())?;
            } else {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Scenario { path, msg, hint } => {
                write!(f, "{}: {}", OneLine(path), OneLine(msg))?;
                if let Some(h) = hint {
                    write!(f, " (hint: {})", OneLine(h))?;
                }
                Ok(())
            }
            Error::Trace {
                file,
                record: 0,
                msg,
            } => write!(f, "trace {}: {}", OneLine(file), OneLine(msg)),
            Error::Trace { file, record, msg } => {
                write!(
                    f,
                    "trace {}: record {record}: {}",
                    OneLine(file),
                    OneLine(msg)
                )
            }
            Error::Interrupted => write!(f, "interrupted"),
            Error::Internal(m) => write!(f, "internal simulator error (a bug): {m}"),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;
