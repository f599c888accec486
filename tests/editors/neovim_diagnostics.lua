-- Headless Neovim, as a user would, for what the editor shows besides lenses:
--   * a file that does not parse (opened that way): the lens of the definition above the
--     error, and a warning at the error saying discovery cannot read the file;
--   * a capture that fails: an error diagnostic on the model's name; after an edit of
--     that file (not saved, not recaptured), the same diagnostic marked as "From the last
--     capture at HH:MM" and lowered to a warning.
-- Results go to $TV_OUT.
local out_path = assert(os.getenv("TV_OUT"))
local ws = assert(os.getenv("TV_WS"))
local cmd = vim.json.decode(assert(os.getenv("TV_CMD")))
local result = {}

local function finish(err)
  result.error = err
  local tmp = out_path .. ".tmp"
  local fh = assert(io.open(tmp, "w"))
  fh:write(vim.json.encode(result))
  fh:close()
  os.rename(tmp, out_path)
  for _, c in ipairs(vim.lsp.get_clients()) do c:stop() end
  vim.wait(5000, function() return #vim.lsp.get_clients() == 0 end, 50)
  vim.cmd("qall!")
end

local function diags(bufnr)
  local out = {}
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    table.insert(out, { line = d.lnum, col = d.col, severity = d.severity, message = d.message, code = d.code })
  end
  return out
end

local ok, err = pcall(function()
  vim.ui.open = function() return { wait = function() return { code = 0 } end }, nil end

  -- 1. A file that does not parse, opened that way.
  vim.cmd.edit(ws .. "/half.py")
  local half = vim.api.nvim_get_current_buf()
  local id = assert(vim.lsp.start({ name = "tensorviz", cmd = cmd, root_dir = ws }))
  local client = assert(vim.lsp.get_client_by_id(id))
  assert(vim.wait(60000, function() return client.initialized end, 50), "server did not initialize")
  assert(vim.wait(30000, function() return #vim.diagnostic.get(half) > 0 end, 100), "no unreadable-file warning")
  result.half_diagnostics = diags(half)
  local lenses = {}
  assert(vim.wait(30000, function()
    vim.lsp.codelens.refresh({ bufnr = half })
    vim.wait(300)
    lenses = vim.lsp.codelens.get(half)
    return #lenses > 0
  end, 100), "no lens above the syntax error")
  result.half_lenses = {}
  for _, lens in ipairs(lenses) do
    table.insert(result.half_lenses, { title = lens.command and lens.command.title, line = lens.range.start.line })
  end

  -- 2. A capture that fails, then an edit of its file.
  vim.cmd.edit(ws .. "/broken.py")
  local broken = vim.api.nvim_get_current_buf()
  vim.lsp.buf_attach_client(broken, id)
  local trusted = false
  client:exec_cmd({ title = "Trust", command = "tensorviz.trustWorkspace", arguments = {} }, { bufnr = broken },
    function(e) trusted = (e == nil) end)
  assert(vim.wait(30000, function() return trusted end, 50), "trust command failed")
  local answered = false
  client:exec_cmd({ title = "Capture", command = "tensorviz.captureProfile", arguments = { "fails" } },
    { bufnr = broken }, function(e, res) answered = true; result.capture = res end)
  assert(vim.wait(120000, function() return answered end, 100), "the capture never answered")
  assert(vim.wait(30000, function() return #vim.diagnostic.get(broken) > 0 end, 100), "no failure diagnostic")
  result.failed = diags(broken)
  -- Edit the file (a comment at the end), as typing would; do not save.
  vim.api.nvim_buf_set_lines(broken, -1, -1, false, { "# still thinking" })
  assert(vim.wait(30000, function()
    local ds = vim.diagnostic.get(broken)
    return ds[1] ~= nil and ds[1].message:find("^From the last capture at") ~= nil
  end, 100), "the failure was not marked as from the last capture")
  result.marked = diags(broken)
end)
finish(not ok and tostring(err) or nil)
