"""Parts: text and file handling with no store and no model (extraction, chunking, the
analyzer, fusion, filters, result types). They import only the foundation and each other."""
