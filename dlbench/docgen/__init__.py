"""The generated reference pages: the config's keys and the record's fields, written from their schemas."""
