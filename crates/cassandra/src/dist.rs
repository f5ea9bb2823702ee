//! Where Cassandra comes from: `$CASSANDRA_HOME/lib`, or the jars of
//! `org.apache.cassandra:cassandra-all` resolved from Maven Central with `mvn` into the user's
//! cache; plus the generated `cassandra.yaml`, `logback.xml` and the JVM flags.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{io_err, Error, Result};
use crate::{UpOptions, CQL_PORT, STORAGE_PORT};

/// Cassandra version fetched from Maven Central when `$CASSANDRA_HOME` is not set.
pub const DEFAULT_VERSION: &str = "5.0.6";

/// A Cassandra distribution: a folder of jars.
#[derive(Debug, Clone, PartialEq)]
pub struct Distribution {
    /// The folder of jars: `$CASSANDRA_HOME/lib`, or `<cache>/cassandra/<version>/lib`.
    pub lib_dir: PathBuf,
    /// The Maven version resolved (`5.0.6`), or the literal `CASSANDRA_HOME` for a local
    /// install, whose version is not read.
    pub version: String,
}

impl Distribution {
    /// The classpath: every jar of the folder (java expands `dir/*`).
    pub fn classpath(&self) -> String {
        format!("{}/*", self.lib_dir.display())
    }
}

/// `java` from `$JAVA_HOME/bin` or PATH.
pub fn find_java() -> Result<PathBuf> {
    if let Some(home) = std::env::var_os("JAVA_HOME") {
        let p = PathBuf::from(home).join("bin/java");
        if p.is_file() {
            return Ok(p);
        }
    }
    which("java").ok_or_else(|| Error::MissingTool {
        tool: "java".into(),
        package: "openjdk-17-jre-headless".into(),
        extra: " (Cassandra 5 runs on Java 11 or 17), or set JAVA_HOME".into(),
    })
}

pub(crate) fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The user's cache folder for iodig: `$XDG_CACHE_HOME/iodig` or `~/.cache/iodig`.
pub fn cache_dir() -> Result<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(x).join("iodig"));
    }
    match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        Some(h) => Ok(PathBuf::from(h).join(".cache/iodig")),
        None => Err(Error::Other(
            "neither XDG_CACHE_HOME nor HOME is set; set one so the Cassandra jars can be cached, or set CASSANDRA_HOME".into(),
        )),
    }
}

/// Finds the jars: `$CASSANDRA_HOME/lib` when set, else the cache, resolving from Maven Central
/// on first use (about 100 jars, 66 MB).
pub fn resolve(version: &str) -> Result<Distribution> {
    if let Some(home) = std::env::var_os("CASSANDRA_HOME").filter(|v| !v.is_empty()) {
        let lib = PathBuf::from(home).join("lib");
        let has_jar = fs::read_dir(&lib)
            .map_err(io_err(&lib))?
            .flatten()
            .any(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with("apache-cassandra")
            });
        if !has_jar {
            return Err(Error::Other(format!(
                "CASSANDRA_HOME: {} holds no apache-cassandra-*.jar; point CASSANDRA_HOME at an unpacked Cassandra tarball or unset it to use the Maven Central jars",
                lib.display()
            )));
        }
        return Ok(Distribution {
            lib_dir: lib,
            version: "CASSANDRA_HOME".into(),
        });
    }
    if !version
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
        || version.is_empty()
    {
        return Err(Error::Other(format!(
            "--cassandra-version {version:?}: expected a version like {DEFAULT_VERSION}"
        )));
    }
    let root = cache_dir()?.join("cassandra").join(version);
    let lib = root.join("lib");
    let marker = root.join(".complete");
    if marker.is_file() || lib.join(format!("cassandra-all-{version}.jar")).is_file() {
        return Ok(Distribution {
            lib_dir: lib,
            version: version.into(),
        });
    }
    let mvn = which("mvn").ok_or_else(|| Error::MissingTool {
        tool: "mvn".into(),
        package: "maven".into(),
        extra: " (it fetches org.apache.cassandra:cassandra-all from Maven Central), or set CASSANDRA_HOME".into(),
    })?;
    fs::create_dir_all(&root).map_err(io_err(&root))?;
    let pom_dir = root.join("pom");
    fs::create_dir_all(&pom_dir).map_err(io_err(&pom_dir))?;
    let pom = pom_dir.join("pom.xml");
    fs::write(&pom, pom_xml(version)).map_err(io_err(&pom))?;
    // Resolve into a partial folder and rename, so an interrupted download is never mistaken
    // for a complete one.
    let partial = root.join("lib.partial");
    let _ = fs::remove_dir_all(&partial);
    iodig_model::eprintln_lossy!("iodig: fetching org.apache.cassandra:cassandra-all:{version} and its dependencies from Maven Central into {}", lib.display());
    let out = Command::new(&mvn)
        .args([
            "-q",
            "-B",
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
        ])
        .arg(format!("-DoutputDirectory={}", partial.display()))
        .current_dir(&pom_dir)
        .output()
        .map_err(|e| Error::Other(format!("cannot run {}: {e}", mvn.display())))?;
    if !out.status.success() {
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        let tail: Vec<&str> = text.lines().rev().take(20).collect();
        return Err(Error::Other(format!(
            "mvn could not resolve org.apache.cassandra:cassandra-all:{version} (pom in {}); is Maven Central reachable and the version right? mvn said:\n{}",
            pom_dir.display(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        )));
    }
    let _ = fs::remove_dir_all(&lib);
    fs::rename(&partial, &lib).map_err(io_err(&lib))?;
    fs::write(&marker, "").map_err(io_err(&marker))?;
    Ok(Distribution {
        lib_dir: lib,
        version: version.into(),
    })
}

fn pom_xml(version: &str) -> String {
    format!(
        r#"<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>iodig</groupId>
  <artifactId>cassandra-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.cassandra</groupId>
      <artifactId>cassandra-all</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
</project>
"#
    )
}

/// JVM flags of a Cassandra 5 server on Java 17: heap, and the module exports/opens that
/// Cassandra's `conf/jvm17-server.options` lists (it reaches into JDK internals).
pub fn jvm_flags(heap: &str) -> Vec<String> {
    let mut f = vec![
        format!("-Xms{heap}"),
        format!("-Xmx{heap}"),
        "-Xss256k".into(),
        "-XX:+UseG1GC".into(),
        "-XX:+HeapDumpOnOutOfMemoryError".into(),
        "-Djava.net.preferIPv4Stack=true".into(),
        "-Djdk.attach.allowAttachSelf=true".into(),
        "-Dio.netty.tryReflectionSetAccessible=true".into(),
    ];
    f.extend(module_flags());
    f
}

/// The Java 17 module flags alone (nodetool needs them too).
pub fn module_flags() -> Vec<String> {
    const EXPORTS: &[&str] = &[
        "java.base/jdk.internal.misc",
        "java.base/jdk.internal.ref",
        "java.base/sun.nio.ch",
        "java.management.rmi/com.sun.jmx.remote.internal.rmi",
        "java.rmi/sun.rmi.registry",
        "java.rmi/sun.rmi.server",
        "java.sql/java.sql",
    ];
    const OPENS: &[&str] = &[
        "java.base/java.lang.module",
        "java.base/jdk.internal.loader",
        "java.base/jdk.internal.ref",
        "java.base/jdk.internal.reflect",
        "java.base/jdk.internal.math",
        "java.base/jdk.internal.module",
        "java.base/jdk.internal.util.jar",
        "jdk.management/com.sun.management.internal",
        "java.base/sun.nio.ch",
        "java.base/java.io",
        "java.base/java.nio",
        "java.base/java.util.concurrent",
        "java.base/java.util",
        "java.base/java.util.concurrent.atomic",
        "java.base/java.lang",
        "java.base/java.math",
        "java.base/java.lang.reflect",
        "java.base/java.net",
    ];
    let mut f = Vec::new();
    for e in EXPORTS {
        f.push(format!("--add-exports={e}=ALL-UNNAMED"));
    }
    for o in OPENS {
        f.push(format!("--add-opens={o}=ALL-UNNAMED"));
    }
    f
}

/// A minimal `cassandra.yaml` for one node of a loopback cluster seeded by 127.0.0.1.
pub fn cassandra_yaml(node_dir: &Path, address: &str, opts: &UpOptions) -> String {
    let d = |s: &str| node_dir.join(s).display().to_string();
    let authenticator = if opts.password_auth {
        "PasswordAuthenticator"
    } else {
        "AllowAllAuthenticator"
    };
    let authorizer = if opts.password_auth {
        "CassandraAuthorizer"
    } else {
        "AllowAllAuthorizer"
    };
    let role_manager = "CassandraRoleManager";
    format!(
        r#"# Written by iodig for a local test node; regenerated on every start.
cluster_name: iodig
num_tokens: {tokens}
allocate_tokens_for_local_replication_factor: 3
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
commitlog_sync: periodic
commitlog_sync_period: 10000ms
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "127.0.0.1:{storage}"
listen_address: {address}
rpc_address: {address}
broadcast_rpc_address: {address}
storage_port: {storage}
native_transport_port: {cql}
start_native_transport: true
endpoint_snitch: SimpleSnitch
data_file_directories:
  - {data}
commitlog_directory: {commitlog}
saved_caches_directory: {saved}
hints_directory: {hints}
cdc_raw_directory: {cdc}
authenticator: {authenticator}
authorizer: {authorizer}
role_manager: {role_manager}
# Snapshots on TRUNCATE/DROP would keep dropped benchmark data on disk.
auto_snapshot: false
{memtable}{tls}"#,
        tokens = opts.num_tokens,
        storage = STORAGE_PORT,
        cql = CQL_PORT,
        data = d("data"),
        commitlog = d("commitlog"),
        saved = d("saved_caches"),
        hints = d("hints"),
        cdc = d("cdc_raw"),
        memtable = opts
            .memtable_space
            .as_ref()
            .map(|m| format!("memtable_heap_space: {m}\n"))
            .unwrap_or_default(),
        tls = if opts.tls {
            crate::tls::yaml_block(&opts.dir)
        } else {
            String::new()
        },
    )
}

/// Logback configuration like Cassandra's own (`system.log` at INFO, `debug.log` with
/// `org.apache.cassandra` at DEBUG, where the flush and compaction lines are), but with UTC
/// timestamps so [`crate::events`] can turn them into unix milliseconds without a time-zone
/// table, and with no console copy so the node writes each line once (JVM errors still land in
/// stdout.log).
pub const LOGBACK_XML: &str = r#"<configuration scan="false">
  <shutdownHook class="ch.qos.logback.core.hook.DelayingShutdownHook"/>
  <appender name="SYSTEMLOG" class="ch.qos.logback.core.rolling.RollingFileAppender">
    <filter class="ch.qos.logback.classic.filter.ThresholdFilter"><level>INFO</level></filter>
    <file>${cassandra.logdir}/system.log</file>
    <rollingPolicy class="ch.qos.logback.core.rolling.SizeAndTimeBasedRollingPolicy">
      <fileNamePattern>${cassandra.logdir}/system.log.%d{yyyy-MM-dd}.%i.zip</fileNamePattern>
      <maxFileSize>50MB</maxFileSize><maxHistory>7</maxHistory><totalSizeCap>1GB</totalSizeCap>
    </rollingPolicy>
    <encoder><pattern>%-5level [%thread] %date{"yyyy-MM-dd HH:mm:ss,SSS",UTC} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <appender name="DEBUGLOG" class="ch.qos.logback.core.rolling.RollingFileAppender">
    <file>${cassandra.logdir}/debug.log</file>
    <rollingPolicy class="ch.qos.logback.core.rolling.SizeAndTimeBasedRollingPolicy">
      <fileNamePattern>${cassandra.logdir}/debug.log.%d{yyyy-MM-dd}.%i.zip</fileNamePattern>
      <maxFileSize>50MB</maxFileSize><maxHistory>7</maxHistory><totalSizeCap>1GB</totalSizeCap>
    </rollingPolicy>
    <encoder><pattern>%-5level [%thread] %date{"yyyy-MM-dd HH:mm:ss,SSS",UTC} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <appender name="ASYNCDEBUGLOG" class="ch.qos.logback.classic.AsyncAppender">
    <queueSize>1024</queueSize><discardingThreshold>0</discardingThreshold><includeCallerData>true</includeCallerData>
    <appender-ref ref="DEBUGLOG" />
  </appender>
  <root level="INFO">
    <appender-ref ref="SYSTEMLOG" />
    <appender-ref ref="ASYNCDEBUGLOG" />
  </root>
  <logger name="org.apache.cassandra" level="DEBUG"/>
</configuration>
"#;

/// Logback configuration for nodetool: warnings only, to stderr, so its stdout is the table.
pub const NODETOOL_LOGBACK_XML: &str = r#"<configuration>
  <appender name="STDERR" class="ch.qos.logback.core.ConsoleAppender">
    <target>System.err</target>
    <encoder><pattern>%-5level %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="STDERR" /></root>
</configuration>
"#;
