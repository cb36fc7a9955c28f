-- The first slice took link IDs from this sequence; the segment allocator
-- (002) has replaced it, and nothing reads it any more.
DROP SEQUENCE link_id_seq;

---- create above / drop below ----

CREATE SEQUENCE link_id_seq AS bigint MINVALUE 1 MAXVALUE 56800235583;
