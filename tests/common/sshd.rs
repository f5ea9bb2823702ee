//! A real OpenSSH server for the tests, on loopback addresses and a free port, with a host key
//! and a client key pair made for it, and an ssh_config that reaches it (`-p ssh.config=…`).
//! Stopped (by its pid) when dropped.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Sshd {
    child: Child,
    /// The client's ssh_config: port, user, key and no host-key prompts for 127.0.0.*.
    pub config: PathBuf,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl Sshd {
    /// Starts sshd listening on each address. Panics with the fix when OpenSSH's server is
    /// missing (scripts/setup.sh installs it): a test that needs it must not pass without it.
    pub fn start(addresses: &[&str]) -> Sshd {
        Sshd::start_with(addresses, "")
    }

    /// Starts sshd with more lines in its sshd_config (e.g. `AcceptEnv …`).
    pub fn start_with(addresses: &[&str], extra_config: &str) -> Sshd {
        let sshd = Path::new("/usr/sbin/sshd");
        assert!(
            sshd.exists(),
            "/usr/sbin/sshd missing: run scripts/setup.sh (apt-get install openssh-server)"
        );
        let dir = tempfile::Builder::new()
            .prefix("iodig-sshd-")
            .tempdir_in("/var/tmp")
            .unwrap();
        let d = dir.path();
        for key in ["host_key", "client_key"] {
            let ok = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(d.join(key))
                .status()
                .unwrap()
                .success();
            assert!(ok, "ssh-keygen failed");
        }
        std::fs::copy(d.join("client_key.pub"), d.join("authorized_keys")).unwrap();
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let listen: String = addresses
            .iter()
            .map(|a| format!("ListenAddress {a}:{port}\n"))
            .collect();
        std::fs::write(
            d.join("sshd_config"),
            format!(
                "{listen}HostKey {hk}\nAuthorizedKeysFile {ak}\nPidFile {pid}\nStrictModes no\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n\
                 PermitRootLogin prohibit-password\nLogLevel ERROR\n{extra_config}",
                hk = d.join("host_key").display(),
                ak = d.join("authorized_keys").display(),
                pid = d.join("sshd.pid").display(),
            ),
        )
        .unwrap();
        let config = d.join("ssh_config");
        std::fs::write(
            &config,
            format!(
                "Host 127.0.0.* localhost\n  Port {port}\n  User root\n  IdentityFile {key}\n  \
                 IdentitiesOnly yes\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  \
                 LogLevel ERROR\n",
                key = d.join("client_key").display()
            ),
        )
        .unwrap();
        // sshd's privilege-separation directory.
        let _ = std::fs::create_dir_all("/run/sshd");
        let child = Command::new(sshd)
            .args(["-D", "-e", "-f"])
            .arg(d.join("sshd_config"))
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        for a in addresses {
            while !speaks_ssh(a, port) {
                assert!(
                    Instant::now() < deadline,
                    "sshd did not answer on {a}:{port}"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Sshd {
            child,
            config,
            port,
            _dir: dir,
        }
    }

    /// The server's pid: every session it serves is a process under it.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `ssh.config=PATH`, for `-p`.
    pub fn property(&self) -> String {
        format!("ssh.config={}", self.config.display())
    }
}

/// Whether an SSH server answers on the address: its banner read and an identification sent
/// back. A probe that only connected and closed would make sshd log
/// `kex_exchange_identification: Connection closed by remote host` into the test's output,
/// which reads like a failed ssh of iodig's.
fn speaks_ssh(address: &str, port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect((address, port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut banner = [0u8; 8];
    s.read_exact(&mut banner).is_ok()
        && &banner == b"SSH-2.0-"
        && s.write_all(b"SSH-2.0-iodig_test_probe\r\n").is_ok()
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
