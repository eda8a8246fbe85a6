"""Every file podsim reads or writes goes through here: one reader per format (read.py), the
writers and their staging (write.py), and the names joined to an output folder (names.py).
Each fails with one line that names the file, or the option and the path.

`podsim.files` is the import surface; the three modules import downwards only
(names <- nothing, read <- nothing, write <- read). It is a module face, not a package face:
callers import these names from it, so it carries no `__all__` (tests/test_package_all.py
counts the package faces' public names).
"""

from podsim.files.names import MAX_NAME_BYTES, inside, plain_name, safe_component, safe_file_name
from podsim.files.read import (
    MAX_BINARY_BYTES,
    MAX_CSV_BYTES,
    MAX_DEPTH,
    MAX_EXPANDED_NODES,
    MAX_TEXT_BYTES,
    MAX_YAML_BYTES,
    check_finite,
    check_input_file,
    decode_text,
    input_cap,
    kind_of,
    parse_json,
    parse_yaml,
    parse_yaml_node,
    read_bytes,
    read_csv,
    read_json,
    read_structured,
    read_text,
    read_yaml,
    yaml_error_text,
)
from podsim.files.write import (
    MARKER,
    check_store,
    claim_folder,
    clean_stale,
    is_podsims,
    output_dir,
    output_file,
    output_folder,
    replace_folder,
    staged_folder,
    write_bytes_atomic,
    write_new,
    write_parquet,
    write_text_atomic,
)
