//! A small HTTP/1.1 server on 127.0.0.1 for the download tests: it serves one file with
//! `Range` support and can misbehave on purpose (drop the connection, lie about the length,
//! answer slowly, send HTML, redirect like Civitai).

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How the server answers for `/model.safetensors`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behaviour {
    Serve,
    /// The first `n` answers stop after `bytes` bytes of the body (and close).
    DropAfter {
        bytes: usize,
        times: usize,
    },
    /// The first answer stops after `bytes` bytes, every later one at once.
    DropAfterThenStall {
        bytes: usize,
    },
    /// Announce a length `by` bytes short of the file's, and send that much.
    ShortLength {
        by: usize,
    },
    /// Send `chunk` bytes every `pause`.
    Slow {
        chunk: usize,
        pause: Duration,
    },
}

/// A running server; requests are logged as `GET /path [Range]`.
pub struct TestServer {
    pub base: String,
    pub log: Arc<Mutex<Vec<String>>>,
    behaviour: Arc<Mutex<Behaviour>>,
    answered: Arc<AtomicUsize>,
}

impl TestServer {
    /// Answers from now on as `behaviour` does (counting answers afresh): the same URL
    /// misbehaving in one run and working in the next.
    pub fn set_behaviour(&self, behaviour: Behaviour) {
        *self.behaviour.lock().unwrap() = behaviour;
        self.answered.store(0, Ordering::SeqCst);
        self.log.lock().unwrap().clear();
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn requests(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

/// Serves `file` as `/model.safetensors` (and `/files/abc` behind `/api/download/1`, with a
/// `Content-Disposition` name), `/page` as HTML and anything else as 404.
pub fn serve(file: Vec<u8>, behaviour: Behaviour) -> TestServer {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let log = Arc::new(Mutex::new(Vec::new()));
    let file = Arc::new(file);
    let answered = Arc::new(AtomicUsize::new(0));
    let behaviour = Arc::new(Mutex::new(behaviour));
    let (server_log, server_answered, server_behaviour) =
        (log.clone(), answered.clone(), behaviour.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (file, log, answered) = (file.clone(), server_log.clone(), server_answered.clone());
            let behaviour = *server_behaviour.lock().unwrap();
            std::thread::spawn(move || {
                let _ = answer(stream, &file, behaviour, &log, &answered);
            });
        }
    });
    TestServer {
        base,
        log,
        behaviour,
        answered,
    }
}

fn answer(
    mut stream: TcpStream,
    file: &[u8],
    behaviour: Behaviour,
    log: &Mutex<Vec<String>>,
    answered: &AtomicUsize,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let path = request_line
        .split_whitespace()
        .nth(1)
        .unwrap_or("/")
        .to_string();
    let mut range_from = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" {
            break;
        }
        if let Some(value) = line.to_ascii_lowercase().strip_prefix("range: bytes=") {
            range_from = value.trim().trim_end_matches('-').parse::<usize>().ok();
        }
    }
    log.lock().unwrap().push(match range_from {
        Some(from) => format!("GET {path} bytes={from}-"),
        None => format!("GET {path}"),
    });
    let head = |status: &str, headers: &[String]| {
        let mut text = format!("HTTP/1.1 {status}\r\nConnection: close\r\n");
        for h in headers {
            text.push_str(h);
            text.push_str("\r\n");
        }
        text.push_str("\r\n");
        text
    };
    match path.as_str() {
        "/api/download/1" => {
            let text = head(
                "307 Temporary Redirect",
                &["Location: /files/abc?sig=1".into()],
            );
            return stream.write_all(text.as_bytes());
        }
        "/page" => {
            let body = "<!DOCTYPE html><html><body>Please log in</body></html>";
            let text = head(
                "200 OK",
                &[
                    "Content-Type: text/html; charset=utf-8".into(),
                    format!("Content-Length: {}", body.len()),
                ],
            );
            return stream.write_all(format!("{text}{body}").as_bytes());
        }
        "/model.safetensors" | "/files/abc?sig=1" => {}
        _ => {
            return stream
                .write_all(head("404 Not Found", &["Content-Length: 0".into()]).as_bytes());
        }
    }
    let from = range_from.unwrap_or(0).min(file.len());
    let mut headers = vec!["Content-Type: application/octet-stream".to_string()];
    if path.starts_with("/files/") {
        headers
            .push("Content-Disposition: attachment; filename=\"civitai-model.safetensors\"".into());
    }
    let mut body = &file[from..];
    if let Behaviour::ShortLength { by } = behaviour {
        body = &body[..body.len().saturating_sub(by)];
    }
    headers.push(format!("Content-Length: {}", body.len()));
    let status = if range_from.is_some() {
        headers.push(format!(
            "Content-Range: bytes {from}-{}/{}",
            file.len() - 1,
            file.len()
        ));
        "206 Partial Content"
    } else {
        "200 OK"
    };
    stream.write_all(head(status, &headers).as_bytes())?;
    let nth = answered.fetch_add(1, Ordering::SeqCst);
    match behaviour {
        Behaviour::DropAfter { bytes, times } if nth < times => {
            stream.write_all(&body[..bytes.min(body.len())])?;
            // Closing with bytes still announced: the client sees the connection end early.
            stream.shutdown(std::net::Shutdown::Both)
        }
        Behaviour::DropAfterThenStall { bytes } => {
            let bytes = if nth == 0 { bytes } else { 0 };
            stream.write_all(&body[..bytes.min(body.len())])?;
            stream.shutdown(std::net::Shutdown::Both)
        }
        Behaviour::Slow { chunk, pause } => {
            for piece in body.chunks(chunk) {
                stream.write_all(piece)?;
                std::thread::sleep(pause);
            }
            Ok(())
        }
        _ => stream.write_all(body),
    }
}
