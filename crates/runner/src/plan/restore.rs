//! `--restore-each-step` checked against where iodig can restore, before anything starts.

use crate::errors::UsageError;
use crate::request::RunRequest;
use anyhow::Result;
use iodig_model::props::Properties;

/// `--restore-each-step` where iodig cannot restore: the basic binding stores nothing, on
/// observed hosts only Cassandra's nodes are restored (through each host's agent), and nodes
/// iodig did not start only when their hosts are observed.
pub(super) fn check_restore(req: &RunRequest, props: &Properties) -> Result<()> {
    if !req.restore_each_step {
        return Ok(());
    }
    if req.db == "basic" {
        return Err(UsageError(
            "--restore-each-step with --db basic: the basic binding stores nothing, so there is no dataset to put back; leave out --restore-each-step"
                .into(),
        )
        .into());
    }
    if req.db != "cassandra" && !req.observe.is_empty() {
        return Err(UsageError(format!(
            "--restore-each-step with --observe: iodig restores a dataset on observed hosts only for --db cassandra (a snapshot of its keyspace on each node); --db {} has no restore there, so leave out --restore-each-step",
            req.db
        ))
        .into());
    }
    if req.db == "cassandra" && props.contains("hosts") && req.observe.is_empty() {
        return Err(UsageError(
            "--restore-each-step on hosts iodig did not start (the hosts property) restores each node through iodig's agent on its host: add --observe with every node's host (reached over ssh), or leave out the hosts property so iodig starts nodes of its own and restores them"
                .into(),
        )
        .into());
    }
    Ok(())
}
