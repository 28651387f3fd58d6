//! The session's notices: raised with a level and a topic, renewed rather than repeated,
//! expiring by level (errors stay until dismissed or until work of their topic succeeds).

use std::time::{Duration, Instant};

use super::Session;

/// How much a notice matters: info notices go after [`INFO_LIFETIME`], warnings after
/// [`WARNING_LIFETIME`], errors stay until dismissed (or until the same kind of work
/// succeeds, see [`Topic`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Info,
    Warning,
    Error,
}

/// What a notice is about: a later success of the same kind clears its errors (a model
/// that loads clears "could not load …", a finished image "generation failed").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topic {
    Load,
    Generate,
    Other,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    /// For its close button.
    pub id: u64,
    pub level: Level,
    pub text: String,
    pub topic: Topic,
    /// When it was (last) raised; it expires from here.
    pub at: Instant,
}

pub const INFO_LIFETIME: Duration = Duration::from_secs(6);
pub const WARNING_LIFETIME: Duration = Duration::from_secs(30);

impl Notice {
    /// When it goes by itself (errors never do).
    pub fn expires(&self) -> Option<Instant> {
        match self.level {
            Level::Info => Some(self.at + INFO_LIFETIME),
            Level::Warning => Some(self.at + WARNING_LIFETIME),
            Level::Error => None,
        }
    }
}

/// Notices kept at most (the oldest go first); the panel shows a few unless expanded.
const MAX_NOTICES: usize = 50;

impl Session {
    /// Raises a notice about nothing in particular (see [`Session::notify_about`]).
    pub fn notify(&mut self, level: Level, text: impl Into<String>) {
        self.notify_about(Topic::Other, level, text);
    }

    /// Raises a notice; the same text as the newest one only renews it.
    pub fn notify_about(&mut self, topic: Topic, level: Level, text: impl Into<String>) {
        let text = text.into();
        let now = Instant::now();
        if let Some(last) = self.notices.last_mut()
            && last.text == text
            && last.level == level
        {
            last.at = now;
            return;
        }
        self.notices.push(Notice {
            id: self.next_notice,
            level,
            text,
            topic,
            at: now,
        });
        self.next_notice += 1;
        if self.notices.len() > MAX_NOTICES {
            self.notices.remove(0);
        }
    }

    /// Work of this kind succeeded: its old errors no longer hold.
    pub(super) fn succeeded(&mut self, topic: Topic) {
        self.notices
            .retain(|n| !(n.topic == topic && n.level == Level::Error));
    }

    pub fn dismiss(&mut self, id: u64) {
        self.notices.retain(|n| n.id != id);
    }

    /// Drops the notices whose time is up; returns when the next one will be.
    pub fn expire(&mut self, now: Instant) -> Option<Instant> {
        self.notices
            .retain(|n| n.expires().is_none_or(|at| at > now));
        if self.notices.is_empty() {
            self.all_notices = false;
        }
        self.notices.iter().filter_map(Notice::expires).min()
    }
}
