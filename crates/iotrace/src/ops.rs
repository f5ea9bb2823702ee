//! Request operations: `cmd_flags & REQ_OP_MASK` to iodig's op classes, the same mapping as
//! `op_class()` in iotrace.bpf.c (used for the raw event stream, decoded in userspace).

/// REQ_OP_MASK: the low 8 bits of cmd_flags hold the op (blk_types.h, REQ_OP_BITS = 8).
pub const REQ_OP_MASK: u32 = 0xff;

/// Op class index in `iodig_model::trace::OPS` order.
pub fn op_class(cmd_flags: u32) -> usize {
    match cmd_flags & REQ_OP_MASK {
        0 => 0, // REQ_OP_READ
        1 => 1, // REQ_OP_WRITE
        3 => 2, // REQ_OP_DISCARD
        2 => 3, // REQ_OP_FLUSH
        _ => 4, // secure erase, write zeroes, zone ops, driver ops
    }
}

/// The name of the op in `cmd_flags`, as the document writes it (`read`, `write`, …, `other`).
pub fn op_name(cmd_flags: u32) -> &'static str {
    iodig_model::trace::OPS[op_class(cmd_flags)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_ops_ignoring_flag_bits() {
        const REQ_PREFLUSH: u32 = 1 << 18; // flag bits sit above REQ_OP_BITS
        assert_eq!(op_name(0), "read");
        assert_eq!(op_name(1 | REQ_PREFLUSH), "write");
        assert_eq!(op_name(2), "flush");
        assert_eq!(op_name(3), "discard");
        assert_eq!(op_name(5), "other"); // secure erase
        assert_eq!(op_name(9), "other"); // write zeroes
    }
}
