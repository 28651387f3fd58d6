//! A named background thread that serves requests from the UI and wakes it with each reply
//! (the pattern of the inference worker, for file work: saving, scanning, thumbnails).
//!
//! **Invariant:** the UI never blocks on a service: sending never waits and replies are
//! taken with `try_recv`; dropping the service closes its queue and joins the thread.

use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, unbounded};

/// In which order queued requests are served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Oldest first (saving must keep its order).
    Fifo,
    /// Newest first (thumbnails: what the user scrolled to last matters most).
    Lifo,
}

/// The UI's handle on a service thread.
pub struct Service<Req, Resp> {
    requests: Option<Sender<Req>>,
    replies: Receiver<Resp>,
    thread: Option<JoinHandle<()>>,
}

impl<Req: Send + 'static, Resp: Send + 'static> Service<Req, Resp> {
    /// Starts thread `name`; `handle` answers one request through `reply` (any number of
    /// replies), and `wake` runs after each reply.
    pub fn spawn(
        name: &str,
        order: Order,
        wake: impl Fn() + Send + 'static,
        mut handle: impl FnMut(Req, &dyn Fn(Resp)) + Send + 'static,
    ) -> std::io::Result<Self> {
        let (requests, request_rx) = unbounded::<Req>();
        let (reply_tx, replies) = unbounded();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let reply = |r: Resp| {
                    let _ = reply_tx.send(r);
                    wake();
                };
                while let Ok(first) = request_rx.recv() {
                    let mut batch = vec![first];
                    batch.extend(request_rx.try_iter());
                    if order == Order::Lifo {
                        batch.reverse();
                    }
                    for request in batch {
                        handle(request, &reply);
                    }
                }
            })?;
        Ok(Self {
            requests: Some(requests),
            replies,
            thread: Some(thread),
        })
    }

    /// Queues a request (never blocks).
    pub fn send(&self, request: Req) {
        if let Some(tx) = &self.requests {
            let _ = tx.send(request);
        }
    }

    /// The next reply, if one is waiting.
    pub fn try_recv(&self) -> Option<Resp> {
        self.replies.try_recv().ok()
    }
}

impl<Req, Resp> Drop for Service<Req, Resp> {
    fn drop(&mut self) {
        // Closing the queue ends the thread's loop once it has served what was queued.
        self.requests = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn replies_come_back_and_drop_serves_what_was_queued() {
        let (seen_tx, seen) = unbounded();
        let service = Service::spawn(
            "test",
            Order::Fifo,
            || {},
            move |n: u32, reply| {
                std::thread::sleep(Duration::from_millis(1));
                let _ = seen_tx.send(n);
                reply(n * 2);
            },
        )
        .unwrap();
        for n in 0..5 {
            service.send(n);
        }
        let mut replies = Vec::new();
        while replies.len() < 5 {
            if let Some(r) = service.try_recv() {
                replies.push(r);
            }
        }
        assert_eq!(replies, [0, 2, 4, 6, 8]);
        service.send(9);
        drop(service);
        assert_eq!(seen.try_iter().last(), Some(9));
    }
}
