//! Block-IO tracing under the database: eBPF CO-RE tracer with a /proc/diskstats fallback.
