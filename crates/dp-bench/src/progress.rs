//! [`TerminalProgress`]: an experiment's [`Progress`] for the command
//! line (the `cli` feature).

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

use crate::Progress;

/// A progress bar on stderr when it is a terminal, plain `[name] …` lines
/// on stderr otherwise.
pub struct TerminalProgress {
    bar: Option<ProgressBar>,
    name: String,
}

impl TerminalProgress {
    /// Progress of the experiment `name`.
    pub fn new(name: &str) -> Self {
        Self {
            bar: None,
            name: name.to_string(),
        }
    }

    /// Clears the bar, if one was drawn.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Progress for TerminalProgress {
    fn start(&mut self, total: u64) {
        if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(total);
            if let Ok(style) = ProgressStyle::with_template(
                "{prefix} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}",
            ) {
                bar.set_style(style);
            }
            bar.set_prefix(self.name.clone());
            self.bar = Some(bar);
        }
    }

    fn step(&mut self, message: &str) {
        match &self.bar {
            Some(bar) => {
                bar.set_message(message.to_string());
                bar.inc(1);
            }
            None => eprintln!("[{}] {message}", self.name),
        }
    }

    fn note(&mut self, message: &str) {
        match &self.bar {
            Some(bar) => bar.println(message),
            None => eprintln!("[{}] {message}", self.name),
        }
    }
}
