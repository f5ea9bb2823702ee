//! `--metrics ADDR:PORT`: a tiny HTTP server on a thread of its own answering `GET /metrics`
//! with the hub's figures. Bound before the run starts so a port in use is a usage error, not a
//! surprise an hour in. Each scrape renders from a copy of the hub, and a client gets a few
//! seconds to send its request and read the answer, so a slow or vanished scraper holds up
//! only other scrapers, never the measurement.

use super::{render, LiveHub};
use crate::errors::UsageError;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a scraper may take to send its request or read the answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the idle server looks for a new connection or the end of the run.
const POLL: Duration = Duration::from_millis(25);
/// The longest request head read: a scrape's is a few hundred bytes.
const MAX_REQUEST: usize = 16 * 1024;

/// The endpoint, serving until [`MetricsServer::stop`].
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Binds `addr` (`HOST:PORT`) now and serves `hub` from a thread of its own.
    pub fn start(addr: &str, hub: Arc<LiveHub>) -> Result<MetricsServer, UsageError> {
        let listener = bind(addr)?;
        let addr = listener
            .local_addr()
            .map_err(|e| UsageError(format!("--metrics {addr}: {e}")))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| UsageError(format!("--metrics {addr}: {e}")))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("iodig-metrics".into())
            .spawn(move || serve(&listener, &hub, &stopping))
            .map_err(|e| UsageError(format!("--metrics {addr}: cannot start its thread: {e}")))?;
        iodig_model::eprintln_lossy!("metrics: http://{addr}/metrics");
        Ok(MetricsServer {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// Where it listens (the port chosen when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves `linger` longer (so a scraper gets the run's last figures), then stops.
    pub fn stop(mut self, linger: Duration) {
        if !linger.is_zero() {
            iodig_model::eprintln_lossy!(
                "metrics: serving the run's last figures {} s longer (metrics.linger)",
                linger.as_secs_f64()
            );
            std::thread::sleep(linger);
        }
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.halt();
    }
}

/// The listener on `addr`, or a usage error naming `--metrics` and what would fix it.
fn bind(addr: &str) -> Result<TcpListener, UsageError> {
    let addrs: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|e| {
            UsageError(format!(
                "--metrics {addr}: not an address to listen on ({e}); give ADDR:PORT, e.g. --metrics 127.0.0.1:9464"
            ))
        })?
        .collect();
    let mut last = None;
    for a in &addrs {
        match TcpListener::bind(a) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some((a, e)),
        }
    }
    Err(UsageError(match last {
        Some((a, e)) if e.kind() == std::io::ErrorKind::AddrInUse => format!(
            "--metrics {addr}: {a} is already in use by another program; pick a free port (or stop what holds it)"
        ),
        Some((a, e)) => format!(
            "--metrics {addr}: cannot listen on {a} ({e}); give an address of this machine and a free port"
        ),
        None => format!("--metrics {addr}: the name resolves to no address; give ADDR:PORT"),
    }))
}

fn serve(listener: &TcpListener, hub: &LiveHub, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, peer)) => {
                // A scraper that misbehaves ends its own connection, nothing else.
                let _ = answer(stream, peer, hub);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(_) => std::thread::sleep(POLL),
        }
    }
}

fn answer(mut stream: TcpStream, peer: SocketAddr, hub: &LiveHub) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(CLIENT_TIMEOUT))?;
    stream.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REQUEST {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let request = String::from_utf8_lossy(&head);
    let mut words = request.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    // A scraper is its address and User-Agent (not its port, new on each connection): each
    // gets the peaks since its own previous scrape.
    let agent = (request.lines())
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.trim()
                .eq_ignore_ascii_case("user-agent")
                .then(|| value.trim())
        })
        .unwrap_or("");
    let scraper = format!("{} {agent}", peer.ip());
    let (status, kind, body) = match (method, path) {
        ("GET" | "HEAD", "/metrics") => (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            render(hub, &scraper),
        ),
        ("GET" | "HEAD", "/") => (
            "200 OK",
            "text/plain; charset=utf-8",
            "iodig: the run's live figures are at /metrics\n".to_string(),
        ),
        ("GET" | "HEAD", _) => (
            "404 Not Found",
            "text/plain; charset=utf-8",
            "not found: the figures are at /metrics\n".to_string(),
        ),
        _ => (
            "405 Method Not Allowed",
            "text/plain; charset=utf-8",
            "only GET /metrics is served\n".to_string(),
        ),
    };
    let mut response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if method != "HEAD" {
        response.extend_from_slice(body.as_bytes());
    }
    stream.write_all(&response)?;
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(addr: SocketAddr, path: &str) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn serves_metrics_and_outlives_a_scraper_that_never_speaks() {
        let hub = Arc::new(LiveHub::silent());
        hub.set_run("r");
        let server = MetricsServer::start("127.0.0.1:0", hub).unwrap();
        let addr = server.local_addr();
        // A connection that sends nothing is dropped after the timeout; the next one is served.
        let _silent = TcpStream::connect(addr).unwrap();
        let answer = get(addr, "/metrics");
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
        assert!(answer.contains("iodig_steps_started_total{run=\"r\"} 0"));
        assert!(get(addr, "/nope").starts_with("HTTP/1.1 404"));
        server.stop(Duration::ZERO);
    }

    #[test]
    fn a_port_in_use_names_the_flag() {
        let held = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = held.local_addr().unwrap().to_string();
        let e = MetricsServer::start(&addr, Arc::new(LiveHub::silent()))
            .err()
            .unwrap();
        assert!(e.0.starts_with(&format!("--metrics {addr}:")), "{}", e.0);
        assert!(e.0.contains("in use"), "{}", e.0);
        let e = MetricsServer::start("nohost", Arc::new(LiveHub::silent()))
            .err()
            .unwrap();
        assert!(e.0.contains("ADDR:PORT"), "{}", e.0);
    }
}
