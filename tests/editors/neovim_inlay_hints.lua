-- Headless Neovim 0.11, as docs/editors.md sets it up: open a small Torch CNN, start
-- `tensorviz lsp`, turn inlay hints on (vim.lsp.inlay_hint.enable), trust the workspace,
-- capture its profile, and read the hints Neovim shows once the server's
-- workspace/inlayHint/refresh arrives; then insert a line above the forward and read
-- them again (moved, and stale). Results go to $TV_OUT.
local out_path = assert(os.getenv("TV_OUT"))
local ws = assert(os.getenv("TV_WS"))
local cmd = vim.json.decode(assert(os.getenv("TV_CMD")))
local result = { before = {}, after = {}, edited = {} }

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

local function label_of(hint)
  if type(hint.label) == "string" then return hint.label end
  local parts = {}
  for _, p in ipairs(hint.label) do table.insert(parts, p.value) end
  return table.concat(parts)
end

local function shown(bufnr)
  local out = {}
  for _, h in ipairs(vim.lsp.inlay_hint.get({ bufnr = bufnr })) do
    local hint = h.inlay_hint
    table.insert(out, { line = hint.position.line, character = hint.position.character, label = label_of(hint),
      tooltip = type(hint.tooltip) == "table" and hint.tooltip.value or hint.tooltip })
  end
  table.sort(out, function(a, b) return a.line < b.line end)
  return out
end

local ok, err = pcall(function()
  vim.ui.open = function() return { wait = function() return { code = 0 } end }, nil end
  vim.cmd.edit(ws .. "/cnn.py")
  local bufnr = vim.api.nvim_get_current_buf()
  local id = assert(vim.lsp.start({ name = "tensorviz", cmd = cmd, root_dir = ws }))
  local client = assert(vim.lsp.get_client_by_id(id))
  assert(vim.wait(60000, function() return client.initialized end, 50), "server did not initialize")
  vim.lsp.inlay_hint.enable(true, { bufnr = bufnr })
  result.enabled = vim.lsp.inlay_hint.is_enabled({ bufnr = bufnr })
  vim.wait(1000, function() return false end, 50)
  result.before = shown(bufnr)

  local function run(command, args, timeout)
    local answered, answer, failure = false, nil, nil
    client:exec_cmd({ title = command, command = command, arguments = args }, { bufnr = bufnr },
      function(e, res) answered, answer, failure = true, res, e end)
    assert(vim.wait(timeout or 150000, function() return answered end, 100), command .. " never answered")
    assert(failure == nil, command .. " failed: " .. vim.inspect(failure))
    return answer
  end
  run("tensorviz.trustWorkspace", {}, 30000)
  result.capture = run("tensorviz.captureProfile", { "cnn" })
  assert(vim.wait(60000, function() return #shown(bufnr) > 0 end, 100), "no inlay hints after the capture")
  result.after = shown(bufnr)
  -- Neovim resolves tooltips (resolveSupport): the server makes one on inlayHint/resolve.
  local first = vim.lsp.inlay_hint.get({ bufnr = bufnr })[1].inlay_hint
  local resolved = client:request_sync("inlayHint/resolve", first, 30000, bufnr)
  assert(resolved and resolved.result, "inlayHint/resolve failed: " .. vim.inspect(resolved))
  result.resolved = { line = resolved.result.position.line, tooltip = resolved.result.tooltip.value }

  -- A line inserted above CNN.forward: the hints below move down and read "(stale)".
  local lines = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  local at
  for i, l in ipairs(lines) do
    if l == "    def forward(self, x):" then at = i end
  end
  vim.api.nvim_buf_set_lines(bufnr, at - 1, at - 1, false, { "    # the forward pass" })
  assert(vim.wait(30000, function()
    local got = shown(bufnr)
    return #got > 0 and got[#got].label:find("(stale)", 1, true) ~= nil
  end, 100), "the hints never turned stale after the edit")
  result.edited = shown(bufnr)
end)
finish(not ok and tostring(err) or nil)
